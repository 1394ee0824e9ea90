package main

import (
	"context"
	"log"
	"os"
	"strconv"
	"syscall"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ephemeralKey marks an inline ephemeral volume in the volume context.
const ephemeralKey = "csi.storage.k8s.io/ephemeral"

// hangKey, a volume attribute, makes NodePublishVolume hang (tests).
const hangKey = "hang"

func (d *driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	types := []csipb.NodeServiceCapability_RPC_Type{
		csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csipb.NodeServiceCapability_RPC_EXPAND_VOLUME,
	}
	if d.stage {
		types = append(types, csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	}
	if d.mountGroup {
		types = append(types, csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP)
	}
	var caps []*csipb.NodeServiceCapability
	for _, t := range types {
		caps = append(caps, &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{
			Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *driver) NodeStageVolume(_ context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	case req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "staging target path is required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	if !d.stage {
		return nil, status.Error(codes.Unimplemented, "this driver does not stage (-stage=false)")
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vols[req.GetVolumeId()]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if err := checkCaps([]*csipb.VolumeCapability{req.GetVolumeCapability()}, v.Kind); err != nil {
		return nil, err
	}
	path := req.GetStagingTargetPath()
	if v.Staged == path {
		return &csipb.NodeStageVolumeResponse{}, nil
	}
	if v.Staged != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is staged at %s already", v.ID, v.Staged)
	}
	block := req.GetVolumeCapability().GetBlock() != nil
	if err := d.stageAt(v, path, block); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	v.Staged, v.Block = path, block
	if err := s.commit(); err != nil {
		return nil, err
	}
	return &csipb.NodeStageVolumeResponse{}, nil
}

// stageAt mounts v at path: a directory's bind mount, an image's file
// system; a block volume only gets its loop device.
func (d *driver) stageAt(v *volume, path string, block bool) error {
	if v.Kind == kindImage {
		if err := d.attach(v); err != nil {
			return err
		}
		if block {
			return nil
		}
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return err
	}
	if mounted, err := mountPoint(path); err != nil || mounted {
		return err
	}
	if v.Kind == kindImage {
		return mountFS(v.Loop, v.FSType, path, false)
	}
	return bindMount(d.store.path(v), path, false, nil)
}

// attach gives an image its loop device (once).
func (d *driver) attach(v *volume) error {
	if v.Loop != "" {
		if _, err := os.Stat(v.Loop); err == nil {
			return nil
		}
	}
	dev, err := attachLoop(d.store.path(v))
	if err != nil {
		return err
	}
	v.Loop = dev
	return nil
}

func (d *driver) NodeUnstageVolume(_ context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	case req.GetStagingTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "staging target path is required")
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := unmount(req.GetStagingTargetPath()); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	v := s.vols[req.GetVolumeId()]
	if v == nil || v.Staged != req.GetStagingTargetPath() {
		return &csipb.NodeUnstageVolumeResponse{}, nil
	}
	if len(v.Published) == 0 {
		if err := detachLoop(v.Loop); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		v.Loop = ""
	}
	v.Staged, v.Block = "", false
	if err := s.commit(); err != nil {
		return nil, err
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *driver) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	case req.GetTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	// A hung driver, for the tests: the call never answers (the caller's
	// deadline ends it), and holds nothing the other calls need.
	if req.GetVolumeContext()[hangKey] == "true" {
		log.Printf("NodePublishVolume %s: hanging (volume attribute hang=true)", req.GetVolumeId())
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	ephemeral := req.GetVolumeContext()[ephemeralKey] == "true"
	v := s.vols[req.GetVolumeId()]
	if v == nil && ephemeral {
		var err error
		if v, err = d.createEphemeral(req); err != nil {
			return nil, err
		}
	}
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if err := checkCaps([]*csipb.VolumeCapability{req.GetVolumeCapability()}, v.Kind); err != nil {
		return nil, err
	}
	target, ro := req.GetTargetPath(), req.GetReadonly()
	if was, ok := v.Published[target]; ok {
		if was != ro {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is published at %s with readonly=%v", v.ID, target, was)
		}
		return &csipb.NodePublishVolumeResponse{}, nil
	}
	staged := d.stage && !v.Ephemeral
	if staged {
		if req.GetStagingTargetPath() == "" {
			return nil, status.Error(codes.InvalidArgument, "staging target path is required: the driver stages volumes")
		}
		if v.Staged != req.GetStagingTargetPath() {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", v.ID, req.GetStagingTargetPath())
		}
	}
	if err := d.publishAt(v, req, staged); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if v.Published == nil {
		v.Published = map[string]bool{}
	}
	v.Published[target] = ro
	if err := s.commit(); err != nil {
		return nil, err
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

// createEphemeral makes the volume of an inline ephemeral volume: its
// volume attributes may ask for a type and a size.
func (d *driver) createEphemeral(req *csipb.NodePublishVolumeRequest) (*volume, error) {
	kind, err := volumeKind(req.GetVolumeContext())
	if err != nil {
		return nil, err
	}
	capacity := int64(defaultSize)
	if sz := req.GetVolumeContext()["size"]; sz != "" {
		q, err := resource.ParseQuantity(sz)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "volume attribute size %q: %v", sz, err)
		}
		capacity = q.Value()
	}
	fs := ""
	if kind == kindImage {
		if fs, err = fsType([]*csipb.VolumeCapability{req.GetVolumeCapability()}, req.GetVolumeContext()); err != nil {
			return nil, err
		}
	}
	if capacity, err = size(&csipb.CapacityRange{RequiredBytes: capacity}, kind, fs); err != nil {
		return nil, err
	}
	v := &volume{ID: req.GetVolumeId(), Name: req.GetVolumeId(), Kind: kind, Capacity: capacity, FSType: fs, Ephemeral: true}
	if err := d.create(v); err != nil {
		return nil, err
	}
	return v, nil
}

// publishAt mounts v at the request's target: the staged file system (or
// the volume itself when not staged) bind-mounted on a directory, or the
// loop device bind-mounted on a file for a block volume.
func (d *driver) publishAt(v *volume, req *csipb.NodePublishVolumeRequest, staged bool) error {
	target, ro := req.GetTargetPath(), req.GetReadonly()
	var opts []string
	if m := req.GetVolumeCapability().GetMount(); m != nil {
		opts = m.GetMountFlags()
	}
	if req.GetVolumeCapability().GetBlock() != nil {
		if err := d.attach(v); err != nil {
			return err
		}
		if err := ensureFile(target); err != nil {
			return err
		}
		return bindMount(v.Loop, target, ro, nil)
	}
	src := d.store.path(v)
	if staged {
		src = v.Staged
	} else if v.Kind == kindImage {
		// Not staged: the image is mounted here, then bind-mounted.
		if err := d.stageAt(v, src+".mnt", false); err != nil {
			return err
		}
		src += ".mnt"
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return err
	}
	if mounted, err := mountPoint(target); err != nil || mounted {
		return err
	}
	if err := bindMount(src, target, ro, opts); err != nil {
		return err
	}
	// VOLUME_MOUNT_GROUP: the driver gives the volume the pod's fsGroup.
	if g := req.GetVolumeCapability().GetMount().GetVolumeMountGroup(); g != "" && d.mountGroup && !ro {
		gid, err := parseGID(g)
		if err != nil {
			return err
		}
		if err := os.Chown(target, -1, gid); err != nil {
			return err
		}
		if err := os.Chmod(target, os.ModeSetgid|0o775); err != nil {
			return err
		}
	}
	return nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	case req.GetTargetPath() == "":
		return nil, status.Error(codes.InvalidArgument, "target path is required")
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	target := req.GetTargetPath()
	if err := unmount(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := removePath(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	v := s.vols[req.GetVolumeId()]
	if v == nil {
		return &csipb.NodeUnpublishVolumeResponse{}, nil
	}
	delete(v.Published, target)
	if len(v.Published) == 0 && v.Staged == "" && v.Kind == kindImage {
		// Not staged: the image was mounted beside its file for
		// publishing, or attached for a block volume.
		if err := unmount(s.path(v) + ".mnt"); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		_ = os.Remove(s.path(v) + ".mnt")
		if err := detachLoop(v.Loop); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		v.Loop = ""
	}
	if v.Ephemeral && len(v.Published) == 0 {
		if err := d.remove(v); err != nil {
			return nil, err
		}
		return &csipb.NodeUnpublishVolumeResponse{}, nil
	}
	if err := s.commit(); err != nil {
		return nil, err
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the file system's usage at a path where the
// volume is staged or published (a block volume: its size).
func (d *driver) NodeGetVolumeStats(_ context.Context, req *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	case req.GetVolumePath() == "":
		return nil, status.Error(codes.InvalidArgument, "volume path is required")
	}
	s := d.store
	s.mu.Lock()
	v := s.vols[req.GetVolumeId()]
	var known bool
	var block bool
	if v != nil {
		_, known = v.Published[req.GetVolumePath()]
		known = known || v.Staged == req.GetVolumePath()
		block = v.Block
		for p := range v.Published {
			if p == req.GetVolumePath() {
				if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
					block = true
				}
			}
		}
	}
	capacity := int64(0)
	if v != nil {
		capacity = v.Capacity
	}
	s.mu.Unlock()
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if !known {
		return nil, status.Errorf(codes.NotFound, "volume %s is not at %s", req.GetVolumeId(), req.GetVolumePath())
	}
	if block {
		return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: capacity}}}, nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(req.GetVolumePath(), &st); err != nil {
		return nil, status.Errorf(codes.NotFound, "statfs %s: %v", req.GetVolumePath(), err)
	}
	bs := st.Bsize
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csipb.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

// NodeExpandVolume grows an image's file system to its (grown) loop
// device.
func (d *driver) NodeExpandVolume(_ context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	case req.GetVolumePath() == "":
		return nil, status.Error(codes.InvalidArgument, "volume path is required")
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vols[req.GetVolumeId()]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if want := req.GetCapacityRange().GetRequiredBytes(); want > v.Capacity {
		return nil, status.Errorf(codes.OutOfRange, "volume %s has %d bytes, %d asked: expand it on the controller first", v.ID, v.Capacity, want)
	}
	if v.Kind == kindImage && v.Loop != "" {
		if _, err := run("losetup", "-c", v.Loop); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if !v.Block && req.GetVolumeCapability().GetBlock() == nil {
			if err := d.growFS(v); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
		}
	}
	return &csipb.NodeExpandVolumeResponse{CapacityBytes: v.Capacity}, nil
}

func parseGID(g string) (int, error) {
	gid, err := strconv.Atoi(g)
	if err != nil || gid < 0 {
		return 0, status.Errorf(codes.InvalidArgument, "volume mount group %q is not a group ID", g)
	}
	return gid, nil
}

// growFS grows a mounted image's file system to its device: xfs_growfs on
// its mount point; resize2fs for ext4, which online needs CAP_SYS_RESOURCE
// (machines without it can grow only xfs volumes online).
func (d *driver) growFS(v *volume) error {
	mnt := v.Staged
	if mnt == "" {
		mnt = d.store.path(v) + ".mnt"
	}
	if v.FSType == "xfs" {
		_, err := run("xfs_growfs", mnt)
		return err
	}
	_, err := run("resize2fs", v.Loop)
	return err
}
