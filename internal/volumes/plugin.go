package volumes

import (
	"context"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Plugin provides the volumes of one kind of volume source (one field of
// v1.VolumeSource). Every kind nodelet supports is a plugin registered under
// its source kind (see Kind); a CSI plugin registers for "csi", a PVC plugin
// for "persistentVolumeClaim", with Manager.Register. A volume whose kind has
// no plugin, or whose plugin cannot support it, fails to set up with a clear
// error, and its pod waits with FailedMount.
type Plugin interface {
	// Name is the directory the plugin's volumes live in under
	// <pod>/volumes, as upstream's plugin names ("kubernetes.io~csi").
	// Teardown finds the plugin of a directory by it, after a restart too.
	Name() string
	// CanSupport reports whether the plugin can provide this volume (a CSI
	// plugin checks the driver).
	CanSupport(spec *v1.Volume) bool
	// SetUp makes the volume ready and returns its host path. It is called
	// on every sync of the pod and must be idempotent; vol.First tells the
	// first call for the volume in this process (what upstream does once,
	// at mount time: fsGroup ownership for example).
	SetUp(ctx context.Context, vol *Volume) (string, error)
	// TearDown releases what SetUp made at dir (unmounts), for a pod that
	// is gone. It gets only the directory: after a restart the pod's spec
	// may be unknown. The pod's directory is removed afterwards.
	TearDown(ctx context.Context, dir string) error
}

// Volume is one volume of a pod, as a plugin sets it up.
type Volume struct {
	Pod  *v1.Pod
	Spec *v1.Volume
	// Dir is <pods>/<uid>/volumes/<plugin name>/<volume name>; the plugin
	// creates it if it needs it.
	Dir string
	// First is true on the first SetUp of this volume by this process: for
	// a new pod, and for every volume again after nodelet restarted.
	First bool
}

// FSGroup is the pod's fsGroup, nil when it has none.
func (v *Volume) FSGroup() *int64 {
	if sc := v.Pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// FSGroupChangePolicy is the pod's fsGroupChangePolicy, nil when unset
// (Always).
func (v *Volume) FSGroupChangePolicy() *v1.PodFSGroupChangePolicy {
	if sc := v.Pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroupChangePolicy
	}
	return nil
}

// sourceKinds maps each pointer field of v1.VolumeSource to its JSON name.
var sourceKinds = func() []sourceKind {
	var out []sourceKind
	t := reflect.TypeOf(v1.VolumeSource{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Type.Kind() != reflect.Pointer {
			continue
		}
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" {
			name = f.Name
		}
		out = append(out, sourceKind{index: i, name: name})
	}
	return out
}()

type sourceKind struct {
	index int
	name  string
}

// Kind is the volume's source kind: the JSON name of the VolumeSource field
// that is set ("emptyDir", "persistentVolumeClaim", "csi", ...), "" when
// none is.
func Kind(v *v1.Volume) string {
	val := reflect.ValueOf(v.VolumeSource)
	for _, k := range sourceKinds {
		if !val.Field(k.index).IsNil() {
			return k.name
		}
	}
	return ""
}

// kindDetail adds what tells volumes of a kind apart to error messages (the
// CSI driver).
func kindDetail(v *v1.Volume) string {
	if v.CSI != nil {
		return " (driver " + v.CSI.Driver + ")"
	}
	return ""
}

// Register makes p provide the volumes of source kind (see Kind), replacing
// whatever provided them before.
func (m *Manager) Register(kind string, p Plugin) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.plugins[kind]; ok {
		delete(m.byName, old.Name())
	}
	m.plugins[kind] = p
	m.byName[p.Name()] = p
}

func (m *Manager) plugin(kind string) Plugin {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.plugins[kind]
}

func (m *Manager) pluginNamed(name string) Plugin {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byName[name]
}
