package pleg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRIEvents watches the CRI's own event stream (GetContainerEvents), which
// containerd 1.7 and later and CRI-O serve.
type CRIEvents struct {
	// Endpoint is the CRI endpoint, unix:///path.
	Endpoint string
	// EstablishedAfter: a stream still open after this long is taken as
	// working (a gRPC server stream says nothing until its first message).
	EstablishedAfter time.Duration
}

// Name implements Watcher.
func (w *CRIEvents) Name() string { return "CRI GetContainerEvents" }

// Watch implements Watcher.
func (w *CRIEvents) Watch(ctx context.Context, established func(), changed func(id string, stopped bool)) error {
	conn, err := grpc.NewClient(endpoint(w.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := runtimeapi.NewRuntimeServiceClient(conn).GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return err
	}
	confirm := time.AfterFunc(establishedAfter(w.EstablishedAfter), established)
	defer confirm.Stop()
	for {
		e, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) && confirm.Stop() {
				// Closed at once without an event: a runtime that has the
				// method but no events to give (CRI-O without
				// enable_pod_events).
				return fmt.Errorf("%w: the runtime closed the event stream at once", ErrUnsupported)
			}
			return streamError(err)
		}
		if confirm.Stop() {
			established()
		}
		if e.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT {
			continue // nothing to act on until it starts
		}
		stopped := e.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT ||
			e.ContainerEventType == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
		changed(e.ContainerId, stopped)
	}
}

func establishedAfter(d time.Duration) time.Duration {
	if d == 0 {
		return time.Second
	}
	return d
}

// streamError says why a stream ended: Unimplemented (the runtime has no
// such method) comes back at once and wraps ErrUnsupported.
func streamError(err error) error {
	if unsupported(err) {
		return fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if errors.Is(err, io.EOF) {
		return errors.New("the runtime closed the event stream")
	}
	return err
}
