package cli

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
)

// unixUpgrader makes the SPDY upgrade (exec, attach, port-forward) over
// nodelet's unix socket: the request goes on a connection of its own, and
// the upgraded connection carries the streams (client-go's executors take
// it as their transport and upgrader).
type unixUpgrader struct {
	socket string
	mu     sync.Mutex
	conn   net.Conn
	br     *bufio.Reader
}

func (u *unixUpgrader) RoundTrip(req *http.Request) (*http.Response, error) {
	conn, err := (&net.Dialer{}).DialContext(req.Context(), "unix", u.socket)
	if err != nil {
		return nil, errNotRunning{u.socket, err}
	}
	req = req.Clone(req.Context())
	req.Header.Set(httpstream.HeaderConnection, httpstream.HeaderUpgrade)
	req.Header.Set(httpstream.HeaderUpgrade, spdy.HeaderSpdy31)
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, err
	}
	u.mu.Lock()
	u.conn, u.br = conn, br
	u.mu.Unlock()
	return resp, nil
}

// NewConnection is the SPDY connection of a 101 answer; any other answer
// is the error nodelet gave.
func (u *unixUpgrader) NewConnection(resp *http.Response) (httpstream.Connection, error) {
	u.mu.Lock()
	conn, br := u.conn, u.br
	u.mu.Unlock()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		conn.Close()
		return nil, fmt.Errorf("%s", string(b))
	}
	return spdy.NewClientConnection(&bufferedConn{Conn: conn, r: br})
}

// bufferedConn reads what the response's reader already buffered first.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
