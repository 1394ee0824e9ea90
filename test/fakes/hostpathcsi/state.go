package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Volume kinds: a directory (bind-mounted), or an ext4 image on a loop
// device (real capacity: expansion and statistics are seen inside the
// container; the only kind that can be a block volume).
const (
	kindDir   = "dir"
	kindImage = "image"
)

// volume is one volume the driver created (or an inline ephemeral one).
type volume struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Capacity int64  `json:"capacity"`
	// FSType is an image's file system: ext4 (the default) or xfs.
	FSType    string `json:"fsType,omitempty"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
	// Loop is the loop device an image is attached to ("" when none).
	Loop string `json:"loop,omitempty"`
	// Attached: ControllerPublishVolume to the node and not unpublished.
	Attached bool `json:"attached,omitempty"`
	// Staged is the staging path; Published the targets, with whether
	// each is read-only.
	Staged    string          `json:"staged,omitempty"`
	Published map[string]bool `json:"published,omitempty"`
	// Block: staged or published as a block device.
	Block bool `json:"block,omitempty"`
}

// store keeps the volumes under dir (a directory or an image each) and
// their state in dir/state.json, so a restarted driver knows them.
type store struct {
	dir  string
	mu   sync.Mutex
	vols map[string]*volume
}

func openStore(dir string) (*store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "volumes"), 0o700); err != nil {
		return nil, err
	}
	s := &store{dir: dir, vols: map[string]*volume{}}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &s.vols); err != nil {
		return nil, fmt.Errorf("state.json: %w", err)
	}
	return s, nil
}

// save writes the state; the caller holds mu.
func (s *store) save() error {
	b, err := json.MarshalIndent(s.vols, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.dir, "state.json"))
}

// commit saves the state, its failure a gRPC Internal error; the caller
// holds mu.
func (s *store) commit() error {
	if err := s.save(); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// path is where a volume's data lives: a directory, or the image file.
func (s *store) path(v *volume) string {
	if v.Kind == kindImage {
		return filepath.Join(s.dir, "volumes", v.ID+".img")
	}
	return filepath.Join(s.dir, "volumes", v.ID)
}

func (s *store) byName(name string) *volume {
	for _, v := range s.vols {
		if v.Name == name {
			return v
		}
	}
	return nil
}
