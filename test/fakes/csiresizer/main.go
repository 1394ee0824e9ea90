// Command csiresizer is the controller side of CSI volume expansion for
// the tests, in the place of kubernetes-csi/external-resizer (not served by
// the module proxy here), doing what it does: for each bound PVC of the
// driver whose request grew beyond its PV, it marks the PVC Resizing
// (allocatedResources, ControllerResizeInProgress), calls the driver's
// ControllerExpandVolume, grows the PV, and then either marks the PVC
// FileSystemResizePending / NodeResizePending (the kubelet finishes with
// NodeExpandVolume) or, when the driver needs no node step, finished (the
// new capacity), with external-resizer's events.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	endpoint := flag.String("csi-address", "", "the driver's CSI socket")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig")
	driver := flag.String("driver", "", "the driver's name (PVs of other drivers are left alone)")
	period := flag.Duration("period", time.Second, "how often PVCs are looked at")
	flag.Parse()
	if *endpoint == "" || *kubeconfig == "" || *driver == "" {
		log.Fatal("-csi-address, -kubeconfig and -driver are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	conn, err := grpc.NewClient("unix://"+*endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	r := &resizer{client: client, ctrl: csipb.NewControllerClient(conn), driver: *driver}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	log.Printf("csiresizer for %s on %s", *driver, *endpoint)
	t := time.NewTicker(*period)
	defer t.Stop()
	for {
		r.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type resizer struct {
	client kubernetes.Interface
	ctrl   csipb.ControllerClient
	driver string
}

func (r *resizer) pass(ctx context.Context) {
	pvcs, err := r.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Printf("list PVCs: %v", err)
		return
	}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := r.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.driver {
			continue
		}
		want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
		have := pv.Spec.Capacity[v1.ResourceStorage]
		if want.Cmp(have) <= 0 {
			continue
		}
		if err := r.resize(ctx, pvc, pv, want); err != nil {
			log.Printf("resize %s/%s: %v", pvc.Namespace, pvc.Name, err)
			r.event(ctx, pvc, v1.EventTypeWarning, "VolumeResizeFailed", err.Error())
		}
	}
}

func (r *resizer) resize(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, want resource.Quantity) error {
	r.event(ctx, pvc, v1.EventTypeNormal, "Resizing", fmt.Sprintf("External resizer is resizing volume %s", pv.Name))
	p := pvc.DeepCopy()
	setCondition(p, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimResizing, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()})
	setAllocated(p, want, v1.PersistentVolumeClaimControllerResizeInProgress)
	p, err := r.client.CoreV1().PersistentVolumeClaims(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	mode := csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	capability := &csipb.VolumeCapability{AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType}}}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		capability.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := r.ctrl.ControllerExpandVolume(cctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId: pv.Spec.CSI.VolumeHandle, CapacityRange: &csipb.CapacityRange{RequiredBytes: want.Value()}, VolumeCapability: capability})
	if err != nil {
		return fmt.Errorf("ControllerExpandVolume: %w", err)
	}
	size := *resource.NewQuantity(resp.GetCapacityBytes(), resource.BinarySI)
	pv = pv.DeepCopy()
	pv.Spec.Capacity[v1.ResourceStorage] = size
	if _, err := r.client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return err
	}
	p = p.DeepCopy()
	removeCondition(p, v1.PersistentVolumeClaimResizing)
	if resp.GetNodeExpansionRequired() {
		setCondition(p, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue,
			LastTransitionTime: metav1.Now(), Message: "Waiting for user to (re-)start a pod to finish file system resize of volume on node."})
		setAllocated(p, want, v1.PersistentVolumeClaimNodeResizePending)
		r.event(ctx, pvc, v1.EventTypeNormal, "FileSystemResizeRequired", "Require file system resize of volume on node")
	} else {
		p.Status.Capacity[v1.ResourceStorage] = size
		delete(p.Status.AllocatedResourceStatuses, v1.ResourceStorage)
		r.event(ctx, pvc, v1.EventTypeNormal, "VolumeResizeSuccessful", "Resize volume succeeded")
	}
	_, err = r.client.CoreV1().PersistentVolumeClaims(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	log.Printf("resized %s/%s (%s) to %s, node expansion required: %v, err %v", pvc.Namespace, pvc.Name, pv.Name, size.String(), resp.GetNodeExpansionRequired(), err)
	return err
}

func setAllocated(p *v1.PersistentVolumeClaim, size resource.Quantity, st v1.ClaimResourceStatus) {
	if p.Status.AllocatedResources == nil {
		p.Status.AllocatedResources = v1.ResourceList{}
	}
	p.Status.AllocatedResources[v1.ResourceStorage] = size
	if p.Status.AllocatedResourceStatuses == nil {
		p.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{}
	}
	p.Status.AllocatedResourceStatuses[v1.ResourceStorage] = st
}

func setCondition(p *v1.PersistentVolumeClaim, c v1.PersistentVolumeClaimCondition) {
	removeCondition(p, c.Type)
	p.Status.Conditions = append(p.Status.Conditions, c)
}

func removeCondition(p *v1.PersistentVolumeClaim, t v1.PersistentVolumeClaimConditionType) {
	var out []v1.PersistentVolumeClaimCondition
	for _, c := range p.Status.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	p.Status.Conditions = out
}

func (r *resizer) event(ctx context.Context, pvc *v1.PersistentVolumeClaim, typ, reason, msg string) {
	_, _ = r.client.CoreV1().Events(pvc.Namespace).Create(ctx, &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: pvc.Name + "."},
		InvolvedObject: v1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, APIVersion: "v1"},
		Reason:         reason, Message: msg, Type: typ, Source: v1.EventSource{Component: "external-resizer " + r.driver},
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
	}, metav1.CreateOptions{})
}
