package events

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// NewRecorder returns nodelet's event recorder, as the kubelet's
// (component "kubelet", the node as host): events are logged, kept in
// recent (the pods' last events, for nodelet describe), and written
// through sink when there is one (cluster mode: the events client). stop
// ends the recording once the events recorded are delivered.
func NewRecorder(sink typedcorev1.EventsGetter, nodeName string, recent *Store) (_ record.EventRecorder, stop func()) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	b := record.NewBroadcaster()
	b.StartStructuredLogging(0)
	b.StartEventWatcher(recent.Add)
	if sink != nil {
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: sink.Events("")})
	}
	return b.NewRecorder(scheme, v1.EventSource{Component: "kubelet", Host: nodeName}), b.Shutdown
}
