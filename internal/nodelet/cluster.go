package nodelet

import (
	"github.com/nodelet/nodelet/internal/events"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	nodev1 "k8s.io/client-go/kubernetes/typed/node/v1"
	storagev1 "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/internal/apiutil"
	"github.com/nodelet/nodelet/internal/config"
)

// newClient builds the API client from the base configuration (the
// kubeconfig's, clientConfig), with the configuration's QPS (kubeAPIQPS,
// kubeAPIBurst), and content type.
func newClient(opts *config.Options, base *rest.Config, contact *apiutil.Contact) (kubernetes.Interface, error) {
	rc := rest.CopyConfig(base)
	rc.Wrap(contact.Wrap) // whether the API server answers: the offline state
	return buildClient(opts, rc, float32(*opts.Config.KubeAPIQPS), int(opts.Config.KubeAPIBurst))
}

// newEventClient builds the client events are written with: its own rate
// limit (eventRecordQPS, eventBurst) as upstream, so that a burst of events
// never delays pod statuses, tokens or the lease.
func newEventClient(opts *config.Options, base *rest.Config) (kubernetes.Interface, error) {
	qps := float32(*opts.Config.EventRecordQPS)
	if qps == 0 {
		qps = -1 // upstream: 0 means no limit
	}
	return buildClient(opts, base, qps, int(opts.Config.EventBurst))
}

func buildClient(opts *config.Options, base *rest.Config, qps float32, burst int) (kubernetes.Interface, error) {
	rc := rest.CopyConfig(base)
	cfg := &opts.Config
	rc.QPS = qps
	rc.Burst = burst
	rc.ContentType = cfg.ContentType
	if rc.ContentType == "" {
		rc.ContentType = "application/vnd.kubernetes.protobuf"
	}
	rc.AcceptContentTypes = rc.ContentType + ",application/json"
	rc.UserAgent = "nodelet/" + opts.NodeName
	return newGroupsClient(rc)
}

// newRecorder returns the event recorder: events are logged, kept in
// recent (the pods' last events, for nodelet describe), and written to the
// API server in cluster mode.
func newRecorder(client kubernetes.Interface, nodeName string, recent *events.Store) record.EventRecorder {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	b := record.NewBroadcaster()
	b.StartStructuredLogging(0)
	b.StartEventWatcher(recent.Add)
	if client != nil {
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	}
	return b.NewRecorder(scheme, v1.EventSource{Component: "kubelet", Host: nodeName})
}

func resourceQuantity(v int64) *resource.Quantity {
	return resource.NewQuantity(v, resource.DecimalSI)
}

// groupsClient is a kubernetes.Interface with only the API groups nodelet
// uses (core, coordination, authentication, authorization, node, storage). Building
// the full clientset links every group's typed client and, with the shared
// informer factory, a third of the binary, which every agent pays for in
// resident memory. Any other group's method panics (the embedded interface
// is nil): add the group here when a new caller needs it.
type groupsClient struct {
	kubernetes.Interface
	core  typedcorev1.CoreV1Interface
	coord coordinationv1.CoordinationV1Interface
	authn authenticationv1.AuthenticationV1Interface
	authz authorizationv1.AuthorizationV1Interface
	node  nodev1.NodeV1Interface
	store storagev1.StorageV1Interface
}

func newGroupsClient(rc *rest.Config) (*groupsClient, error) {
	c := &groupsClient{}
	var err error
	if c.core, err = typedcorev1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.coord, err = coordinationv1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.authn, err = authenticationv1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.authz, err = authorizationv1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.node, err = nodev1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.store, err = storagev1.NewForConfig(rc); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *groupsClient) CoreV1() typedcorev1.CoreV1Interface                    { return c.core }
func (c *groupsClient) StorageV1() storagev1.StorageV1Interface                { return c.store }
func (c *groupsClient) CoordinationV1() coordinationv1.CoordinationV1Interface { return c.coord }
func (c *groupsClient) AuthenticationV1() authenticationv1.AuthenticationV1Interface {
	return c.authn
}
func (c *groupsClient) AuthorizationV1() authorizationv1.AuthorizationV1Interface { return c.authz }
func (c *groupsClient) NodeV1() nodev1.NodeV1Interface                            { return c.node }
