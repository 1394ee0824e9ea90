package apiclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	nodev1 "k8s.io/client-go/kubernetes/typed/node/v1"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	storagev1 "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Interface is the API groups nodelet uses: core (pods, nodes, events,
// ConfigMaps, Secrets, tokens, Services, PVCs, PVs), coordination (the
// node's Lease), authentication and authorization (the kubelet API's
// TokenReviews and SubjectAccessReviews), certificates
// (ClusterTrustBundles, for projected volumes), node (RuntimeClasses),
// storage (CSIDrivers, CSINodes, VolumeAttachments) and resource
// (ResourceClaims, ResourceSlices: DRA). The fake clientset
// (k8s.io/client-go/kubernetes/fake) satisfies it.
type Interface interface {
	CoreV1() corev1.CoreV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	AuthenticationV1() authenticationv1.AuthenticationV1Interface
	AuthorizationV1() authorizationv1.AuthorizationV1Interface
	CertificatesV1() certificatesv1.CertificatesV1Interface
	NodeV1() nodev1.NodeV1Interface
	StorageV1() storagev1.StorageV1Interface
	ResourceV1() resourcev1.ResourceV1Interface
}

var _ Interface = kubernetes.Interface(nil)

// groups is Interface over one REST configuration.
type groups struct {
	core  corev1.CoreV1Interface
	coord coordinationv1.CoordinationV1Interface
	authn authenticationv1.AuthenticationV1Interface
	authz authorizationv1.AuthorizationV1Interface
	certs certificatesv1.CertificatesV1Interface
	node  nodev1.NodeV1Interface
	store storagev1.StorageV1Interface
	res   resourcev1.ResourceV1Interface
}

// NewForConfig builds the groups' clients for rc.
func NewForConfig(rc *rest.Config) (Interface, error) {
	c := &groups{}
	var err error
	if c.core, err = corev1.NewForConfig(rc); err != nil {
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
	if c.certs, err = certificatesv1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.node, err = nodev1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.store, err = storagev1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.res, err = resourcev1.NewForConfig(rc); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *groups) CoreV1() corev1.CoreV1Interface                               { return c.core }
func (c *groups) CoordinationV1() coordinationv1.CoordinationV1Interface       { return c.coord }
func (c *groups) AuthenticationV1() authenticationv1.AuthenticationV1Interface { return c.authn }
func (c *groups) AuthorizationV1() authorizationv1.AuthorizationV1Interface    { return c.authz }
func (c *groups) CertificatesV1() certificatesv1.CertificatesV1Interface       { return c.certs }
func (c *groups) NodeV1() nodev1.NodeV1Interface                               { return c.node }
func (c *groups) StorageV1() storagev1.StorageV1Interface                      { return c.store }
func (c *groups) ResourceV1() resourcev1.ResourceV1Interface                   { return c.res }

// LeaseClientset is c as the full clientset, for the one library that
// takes one: component-helpers' lease controller, which calls
// CoordinationV1 (the Lease) and CoreV1 (the Node, as the Lease's owner).
// Any other group's method panics: TestLeaseClientset runs the controller
// through it.
func LeaseClientset(c Interface) kubernetes.Interface {
	return leaseClientset{c: c}
}

type leaseClientset struct {
	kubernetes.Interface // nil: the lease controller calls only the two below
	c                    Interface
}

func (l leaseClientset) CoreV1() corev1.CoreV1Interface { return l.c.CoreV1() }
func (l leaseClientset) CoordinationV1() coordinationv1.CoordinationV1Interface {
	return l.c.CoordinationV1()
}

// ListWatch is the list and watch of one typed client's resource (its List
// and Watch methods), with each request's options set by tweak (a field
// selector), for an informer over Interface. c is the client the
// functions belong to (the fake clientset tells informers it does not
// support watch lists).
func ListWatch[L runtime.Object](c Interface, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&o)
			}
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&o)
			}
			return watchFn(ctx, o)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, c)
}
