package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	mib = 1 << 20
	// defaultSize is a volume's size when the request names none.
	defaultSize = 16 * mib
	// minImageSize is the smallest ext4 image worth making; xfs needs
	// 300 MiB.
	minImageSize = 8 * mib
	minXFSSize   = 300 * mib
)

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkCaps validates volume capabilities for a volume kind.
func checkCaps(caps []*csipb.VolumeCapability, kind string) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	for _, c := range caps {
		if c.GetAccessMode() == nil {
			return status.Error(codes.InvalidArgument, "a volume capability has no access mode")
		}
		switch {
		case c.GetBlock() != nil:
			if kind != kindImage {
				return status.Error(codes.InvalidArgument, "block access needs parameter type=image")
			}
		case c.GetMount() != nil:
			if fs := c.GetMount().GetFsType(); fs != "" && fs != "ext4" && fs != "xfs" {
				return status.Errorf(codes.InvalidArgument, "fsType %q: only ext4 and xfs are supported", fs)
			}
		default:
			return status.Error(codes.InvalidArgument, "a volume capability has no access type")
		}
	}
	return nil
}

// volumeKind is the kind the request's parameters ask for.
func volumeKind(params map[string]string) (string, error) {
	switch k := params["type"]; k {
	case "", kindDir:
		return kindDir, nil
	case kindImage:
		return kindImage, nil
	default:
		return "", status.Errorf(codes.InvalidArgument, "parameter type %q: want dir or image", k)
	}
}

// fsType is the file system an image gets: the capabilities' fsType, else
// the parameter fsType, else ext4.
func fsType(caps []*csipb.VolumeCapability, params map[string]string) (string, error) {
	fs := params["fsType"]
	for _, c := range caps {
		if f := c.GetMount().GetFsType(); f != "" {
			fs = f
		}
	}
	switch fs {
	case "", "ext4":
		return "ext4", nil
	case "xfs":
		return "xfs", nil
	}
	return "", status.Errorf(codes.InvalidArgument, "fsType %q: only ext4 and xfs are supported", fs)
}

// size picks a capacity within the range: the required bytes, the default
// when unset, at least an image's minimum.
func size(r *csipb.CapacityRange, kind, fs string) (int64, error) {
	want := r.GetRequiredBytes()
	if want == 0 {
		want = defaultSize
		if l := r.GetLimitBytes(); l > 0 && l < want {
			want = l
		}
	}
	if kind == kindImage && want < minImageSize {
		want = minImageSize
	}
	if kind == kindImage && fs == "xfs" && want < minXFSSize {
		want = minXFSSize
	}
	if l := r.GetLimitBytes(); l > 0 && want > l {
		return 0, status.Errorf(codes.OutOfRange, "capacity %d above the limit %d", want, l)
	}
	return want, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	var caps []*csipb.ControllerServiceCapability
	for _, t := range []csipb.ControllerServiceCapability_RPC_Type{
		csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	} {
		caps = append(caps, &csipb.ControllerServiceCapability{Type: &csipb.ControllerServiceCapability_Rpc{
			Rpc: &csipb.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

func (d *driver) topology() []*csipb.Topology {
	return []*csipb.Topology{{Segments: map[string]string{TopologyKey: d.nodeID}}}
}

func (d *driver) CreateVolume(_ context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name is required")
	}
	kind, err := volumeKind(req.GetParameters())
	if err != nil {
		return nil, err
	}
	if err := checkCaps(req.GetVolumeCapabilities(), kind); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "volume content sources are not supported")
	}
	fs := ""
	if kind == kindImage {
		if fs, err = fsType(req.GetVolumeCapabilities(), req.GetParameters()); err != nil {
			return nil, err
		}
	}
	capacity, err := size(req.GetCapacityRange(), kind, fs)
	if err != nil {
		return nil, err
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.byName(req.GetName()); v != nil {
		if v.Kind != kind || v.Capacity < req.GetCapacityRange().GetRequiredBytes() ||
			(req.GetCapacityRange().GetLimitBytes() > 0 && v.Capacity > req.GetCapacityRange().GetLimitBytes()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with another size or type", req.GetName())
		}
		return &csipb.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
	}
	v := &volume{ID: newID(), Name: req.GetName(), Kind: kind, Capacity: capacity, FSType: fs}
	if err := d.create(v); err != nil {
		return nil, err
	}
	return &csipb.CreateVolumeResponse{Volume: d.csiVolume(v)}, nil
}

// create makes v's directory or image and records it; the caller holds mu.
func (d *driver) create(v *volume) error {
	s := d.store
	var err error
	if v.Kind == kindImage {
		err = makeImage(s.path(v), v.Capacity, v.FSType)
	} else {
		err = os.Mkdir(s.path(v), 0o777)
		if err == nil {
			err = os.Chmod(s.path(v), 0o777)
		}
	}
	if err != nil {
		return status.Errorf(codes.Internal, "create volume %s: %v", v.ID, err)
	}
	s.vols[v.ID] = v
	return s.save()
}

func (d *driver) csiVolume(v *volume) *csipb.Volume {
	ctx := map[string]string{"type": v.Kind}
	if v.FSType != "" {
		ctx["fsType"] = v.FSType
	}
	return &csipb.Volume{VolumeId: v.ID, CapacityBytes: v.Capacity, VolumeContext: ctx,
		AccessibleTopology: d.topology()}
}

func (d *driver) DeleteVolume(_ context.Context, req *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vols[req.GetVolumeId()]
	if v == nil {
		return &csipb.DeleteVolumeResponse{}, nil
	}
	if v.Staged != "" || len(v.Published) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still staged or published", v.ID)
	}
	if err := d.remove(v); err != nil {
		return nil, err
	}
	return &csipb.DeleteVolumeResponse{}, nil
}

// remove deletes v's data and record; the caller holds mu.
func (d *driver) remove(v *volume) error {
	s := d.store
	if err := detachLoop(v.Loop); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if err := os.RemoveAll(s.path(v)); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	delete(s.vols, v.ID)
	return s.save()
}

func (d *driver) ControllerPublishVolume(_ context.Context, req *csipb.ControllerPublishVolumeRequest) (*csipb.ControllerPublishVolumeResponse, error) {
	switch {
	case req.GetVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	case req.GetNodeId() == "":
		return nil, status.Error(codes.InvalidArgument, "node ID is required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vols[req.GetVolumeId()]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if req.GetNodeId() != d.nodeID {
		return nil, status.Errorf(codes.NotFound, "node %s not found (this driver serves %s)", req.GetNodeId(), d.nodeID)
	}
	if err := checkCaps([]*csipb.VolumeCapability{req.GetVolumeCapability()}, v.Kind); err != nil {
		return nil, err
	}
	v.Attached = true
	if err := s.commit(); err != nil {
		return nil, err
	}
	return &csipb.ControllerPublishVolumeResponse{PublishContext: map[string]string{"attachedTo": d.nodeID}}, nil
}

func (d *driver) ControllerUnpublishVolume(_ context.Context, req *csipb.ControllerUnpublishVolumeRequest) (*csipb.ControllerUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.vols[req.GetVolumeId()]; v != nil && v.Attached {
		v.Attached = false
		if err := s.commit(); err != nil {
			return nil, err
		}
	}
	return &csipb.ControllerUnpublishVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csipb.ValidateVolumeCapabilitiesRequest) (*csipb.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	s := d.store
	s.mu.Lock()
	v := s.vols[req.GetVolumeId()]
	s.mu.Unlock()
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if err := checkCaps(req.GetVolumeCapabilities(), v.Kind); err != nil {
		return &csipb.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters()}}, nil
}

// ControllerExpandVolume grows the volume: an image file grows (its loop
// device learns it), and the node must then grow the file system
// (node_expansion_required) unless the volume is a block device or a
// directory.
func (d *driver) ControllerExpandVolume(_ context.Context, req *csipb.ControllerExpandVolumeRequest) (*csipb.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID is required")
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity range is required")
	}
	s := d.store
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.vols[req.GetVolumeId()]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	want := req.GetCapacityRange().GetRequiredBytes()
	if l := req.GetCapacityRange().GetLimitBytes(); l > 0 && want > l {
		return nil, status.Errorf(codes.OutOfRange, "capacity %d above the limit %d", want, l)
	}
	if want > v.Capacity {
		if v.Kind == kindImage {
			if err := os.Truncate(s.path(v), want); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
			if v.Loop != "" {
				if _, err := run("losetup", "-c", v.Loop); err != nil {
					return nil, status.Error(codes.Internal, err.Error())
				}
			}
		}
		v.Capacity = want
		if err := s.commit(); err != nil {
			return nil, err
		}
	}
	nodeExpansion := v.Kind == kindImage && !v.Block
	if c := req.GetVolumeCapability(); c != nil && c.GetBlock() != nil {
		nodeExpansion = false
	}
	return &csipb.ControllerExpandVolumeResponse{CapacityBytes: v.Capacity, NodeExpansionRequired: nodeExpansion}, nil
}
