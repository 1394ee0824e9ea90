package csi

import (
	"context"
	"errors"
	"time"

	"github.com/nodelet/nodelet/internal/apiclient"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"
)

// APINodeInfo is NodeInfo in the API server: the Node patched as upstream
// (through its status, which carries the metadata too), the CSINode
// created or updated; conflicts retried.
type APINodeInfo struct {
	Client   apiclient.Interface
	NodeName string
	// Registered is closed once the Node is registered (RunCSINode waits
	// for it).
	Registered <-chan struct{}
}

// Install implements NodeInfo.
func (a *APINodeInfo) Install(ctx context.Context, driver, nodeID string, maxVolumes int64, topology map[string]string) error {
	err := a.updateNode(ctx, func(n *v1.Node) (bool, error) {
		idChanged, err := SetNodeID(n, driver, nodeID)
		if err != nil {
			return false, err
		}
		labelsChanged, err := SetTopologyLabels(n, topology)
		return idChanged || labelsChanged, err
	})
	if err != nil {
		return err
	}
	return a.updateCSINode(ctx, func(c *storagev1.CSINode) bool { return InstallDriver(c, driver, nodeID, maxVolumes, topology) })
}

// Uninstall implements NodeInfo.
func (a *APINodeInfo) Uninstall(ctx context.Context, driver string) error {
	return errors.Join(
		a.updateCSINode(ctx, func(c *storagev1.CSINode) bool { return UninstallDriver(c, driver) }),
		a.updateNode(ctx, func(n *v1.Node) (bool, error) { return RemoveNodeID(n, driver) }),
	)
}

func (a *APINodeInfo) updateNode(ctx context.Context, change func(*v1.Node) (bool, error)) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		old, err := a.Client.CoreV1().Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n := old.DeepCopy()
		changed, err := change(n)
		if err != nil || !changed {
			return err
		}
		_, _, err = nodeutil.PatchNodeStatus(a.Client.CoreV1(), types.NodeName(a.NodeName), old, n)
		return err
	})
}

func (a *APINodeInfo) updateCSINode(ctx context.Context, change func(*storagev1.CSINode) bool) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := a.Client.StorageV1().CSINodes().Get(ctx, a.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			node, err := a.Client.CoreV1().Nodes().Get(ctx, a.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := NewCSINode(a.NodeName, node.UID)
			change(c)
			_, err = a.Client.StorageV1().CSINodes().Create(ctx, c, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(storagev1.Resource("csinodes"), a.NodeName, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		c := cur.DeepCopy()
		if !change(c) {
			return nil
		}
		_, err = a.Client.StorageV1().CSINodes().Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
}

// Ensure creates the node's CSINode (no drivers, the migrated-plugins
// annotation) when it is missing, as upstream does at start, so that the
// cluster sees it before any driver registers.
func (a *APINodeInfo) Ensure(ctx context.Context) error {
	return a.updateCSINode(ctx, func(c *storagev1.CSINode) bool { return SetMigrationAnnotation(c) })
}

// ensureRetry is how often RunCSINode tries Ensure again while the API
// server refuses or is away.
const ensureRetry = time.Second

// RunCSINode makes sure the node's CSINode exists once the Node is
// registered (Registered), trying again every second while the API server
// refuses or is away; it returns once it does, or when ctx is done.
func (a *APINodeInfo) RunCSINode(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.Registered:
	}
	logger := klog.FromContext(ctx)
	_ = wait.PollUntilContextCancel(ctx, ensureRetry, true, func(ctx context.Context) (bool, error) {
		if err := a.Ensure(ctx); err != nil {
			logger.V(2).Info("Cannot create the node's CSINode yet", "err", err)
			return false, nil
		}
		return true, nil
	})
	return nil
}
