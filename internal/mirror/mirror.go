package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodelet/nodelet/internal/apiclient"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/internal/apiutil"
	"github.com/nodelet/nodelet/internal/podspec"
)

// Manager creates, replaces and deletes mirror pods.
type Manager struct {
	client apiclient.Interface
	lister corelisters.PodLister
	// node returns the Node that owns mirror pods (nil until registered).
	node func() *v1.Node
}

// Config configures a Manager.
type Config struct {
	// Client writes the mirror pods.
	Client apiclient.Interface
	// Lister gives the pods bound to the node, mirror pods included.
	Lister corelisters.PodLister
	// Node returns the Node that owns mirror pods (nil until registered).
	Node func() *v1.Node
}

// New returns a Manager for cfg. It fails when cfg has no Client, Lister or
// Node.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Client == nil:
		return nil, errors.New("mirror: Config.Client is required")
	case cfg.Lister == nil:
		return nil, errors.New("mirror: Config.Lister is required")
	case cfg.Node == nil:
		return nil, errors.New("mirror: Config.Node is required")
	}
	return &Manager{client: cfg.Client, lister: cfg.Lister, node: cfg.Node}, nil
}

// Get returns the mirror pod of a static pod, if the informer has one.
func (m *Manager) Get(static *v1.Pod) *v1.Pod {
	p, err := m.lister.Pods(static.Namespace).Get(static.Name)
	if err != nil {
		return nil
	}
	if _, ok := p.Annotations[podspec.ConfigMirrorAnnotationKey]; !ok {
		return nil
	}
	return p
}

// Ensure makes the static pod's mirror pod exist and match it.
func (m *Manager) Ensure(ctx context.Context, static *v1.Pod) error {
	node := m.node()
	if node == nil || node.UID == "" {
		return nil // not registered yet: the next sync does it
	}
	hash := static.Annotations[podspec.ConfigHashAnnotationKey]
	cur := m.Get(static)
	if cur != nil && cur.Annotations[podspec.ConfigMirrorAnnotationKey] == hash && cur.DeletionTimestamp == nil {
		return nil
	}
	if cur != nil {
		if err := m.delete(ctx, cur); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Replaced an outdated mirror pod", "pod", klog.KObj(static))
	}
	mp := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        static.Name,
			Namespace:   static.Namespace,
			Labels:      static.Labels,
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
			}},
		},
		Spec: *static.Spec.DeepCopy(),
	}
	for k, v := range static.Annotations {
		mp.Annotations[k] = v
	}
	mp.Annotations[podspec.ConfigMirrorAnnotationKey] = hash
	_, err := m.client.CoreV1().Pods(static.Namespace).Create(ctx, mp, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // the informer has not seen it yet
	}
	if err != nil {
		return fmt.Errorf("create mirror pod: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("Created mirror pod", "pod", klog.KObj(static))
	return nil
}

// Delete removes the static pod's mirror pod, if any.
func (m *Manager) Delete(ctx context.Context, static *v1.Pod) error {
	if cur := m.Get(static); cur != nil {
		return m.delete(ctx, cur)
	}
	return nil
}

func (m *Manager) delete(ctx context.Context, mp *v1.Pod) error {
	if err := apiutil.DeletePodNow(ctx, m.client, mp); err != nil {
		return fmt.Errorf("delete mirror pod: %w", err)
	}
	return nil
}
