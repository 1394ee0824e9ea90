package pleg

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
)

// ContainerdEvents watches containerd's own event service
// (containerd.services.events.v1.Events/Subscribe) on the CRI socket, for
// containerd releases whose CRI has no event stream (1.6). It follows the
// task exits of the CRI namespace: a container's or a sandbox's main
// process ending. Exec processes ending (probes) are ignored.
//
// Only two messages are needed, so they are encoded by hand with protowire
// instead of linking containerd's API module.
type ContainerdEvents struct {
	// Endpoint is the CRI endpoint, unix:///path/containerd.sock.
	Endpoint string
	// Namespace is the CRI plugin's containerd namespace ("k8s.io").
	Namespace string
	// EstablishedAfter: see CRIEvents.
	EstablishedAfter time.Duration
}

// Name implements Watcher.
func (w *ContainerdEvents) Name() string { return "containerd events" }

const (
	subscribeMethod = "/containerd.services.events.v1.Events/Subscribe"
	taskExitTopic   = "/tasks/exit"
)

// Watch implements Watcher.
func (w *ContainerdEvents) Watch(ctx context.Context, established func(), changed func(id string, stopped bool)) error {
	ep := endpoint(w.Endpoint)
	if !strings.HasPrefix(ep, "unix://") {
		return fmt.Errorf("%w: endpoint %q is not a unix socket", ErrUnsupported, w.Endpoint)
	}
	ns := w.Namespace
	if ns == "" {
		ns = "k8s.io"
	}
	conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, subscribeMethod, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	filter := fmt.Sprintf(`topic==%q,namespace==%q`, taskExitTopic, ns)
	req := protowire.AppendTag(nil, 1, protowire.BytesType)
	req = protowire.AppendString(req, filter)
	if err := stream.SendMsg(&req); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	// Unimplemented (CRI-O, another runtime on the socket) comes back at
	// once; an open stream stays silent until the first event.
	confirm := time.AfterFunc(establishedAfter(w.EstablishedAfter), established)
	defer confirm.Stop()
	for {
		var msg []byte
		if err := stream.RecvMsg(&msg); err != nil {
			return streamError(err)
		}
		if confirm.Stop() {
			established()
		}
		topic, cid, id, ok := parseEnvelope(msg)
		if !ok || topic != taskExitTopic || cid == "" {
			continue
		}
		if id != "" && id != cid {
			continue // an exec process (a probe, kubectl exec) ended
		}
		changed(cid, true)
	}
}

// parseEnvelope reads containerd's Envelope{timestamp=1, namespace=2,
// topic=3, event=4 (Any{type_url=1, value=2})} and, from the event,
// TaskExit{container_id=1, id=2}.
func parseEnvelope(b []byte) (topic, containerID, execID string, ok bool) {
	var event []byte
	if !walk(b, func(num protowire.Number, v []byte) {
		switch num {
		case 3:
			topic = string(v)
		case 4:
			event = v
		}
	}) {
		return "", "", "", false
	}
	var value []byte
	if !walk(event, func(num protowire.Number, v []byte) {
		if num == 2 {
			value = v
		}
	}) {
		return "", "", "", false
	}
	ok = walk(value, func(num protowire.Number, v []byte) {
		switch num {
		case 1:
			containerID = string(v)
		case 2:
			execID = string(v)
		}
	})
	return topic, containerID, execID, ok
}

// walk calls f for every length-delimited field of a message and skips the
// others; false when the message is malformed.
func walk(b []byte, f func(protowire.Number, []byte)) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return false
			}
			f(num, v)
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return false
		}
		b = b[m:]
	}
	return true
}

// rawCodec passes messages as the bytes they are on the wire.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
	}
	return *b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	b, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*b = append((*b)[:0], data...)
	return nil
}
