package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestReferences(t *testing.T) {
	opt := true
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: v1.PodSpec{
		ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}},
		Volumes: []v1.Volume{
			{Name: "a", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm1"}, Optional: &opt}}},
			{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s1"}}},
			{Name: "c", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cm2"}}},
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s2"}}},
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
			{Name: "d", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			{Name: "e", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}},
			{Name: "f", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "hostpath.csi", NodePublishSecretRef: &v1.LocalObjectReference{Name: "s3"}}}},
		},
		InitContainers: []v1.Container{{Name: "i", EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm3"}}}}}},
		Containers: []v1.Container{{Name: "c", Env: []v1.EnvVar{
			{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm1"}, Key: "k"}}},
			{Name: "Y", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s4"}, Key: "k"}}},
			{Name: "Z", Value: "plain"},
		}, EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s1"}}}}}},
	}}
	got := References(p)
	want := Refs{
		ConfigMaps:    []string{"cm1", "cm2", "cm3"},
		Secrets:       []string{"pull", "s1", "s2", "s3", "s4"},
		Claims:        []string{"data", "web-e"},
		InlineDrivers: []string{"hostpath.csi"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("References:\n got %+v\nwant %+v", got, want)
	}
	if got := References(&v1.Pod{}); !reflect.DeepEqual(got, Refs{}) {
		t.Errorf("References of an empty pod: %+v", got)
	}
}

func TestUnreachable(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), true},
		{context.DeadlineExceeded, true},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewForbidden(gr, "x", errors.New("no")), false},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewInternalError(errors.New("etcd")), true},
	} {
		if got := Unreachable(tc.err); got != tc.want {
			t.Errorf("Unreachable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// fakeAPI is the API getter: it answers from objs, or fails with down.
type fakeAPI struct {
	down    error
	objs    map[string]any
	token   string
	forgot  []types.UID
	entered int
}

func (f *fakeAPI) answer(key string) (any, error) {
	f.entered++
	if f.down != nil {
		return nil, f.down
	}
	if o, ok := f.objs[key]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, key)
}

func (f *fakeAPI) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	o, err := f.answer("cm/" + ns + "/" + name)
	if err != nil {
		return nil, err
	}
	return o.(*v1.ConfigMap), nil
}

func (f *fakeAPI) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	o, err := f.answer("secret/" + ns + "/" + name)
	if err != nil {
		return nil, err
	}
	return o.(*v1.Secret), nil
}

func (f *fakeAPI) Token(context.Context, *v1.Pod, string, string, int64) (string, error) {
	if f.down != nil {
		return "", f.down
	}
	return f.token, nil
}

func (f *fakeAPI) ClusterTrustBundle(_ context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	o, err := f.answer("ctb/" + name)
	if err != nil {
		return nil, err
	}
	return o.(*certificatesv1.ClusterTrustBundle), nil
}

func (f *fakeAPI) ClusterTrustBundles(context.Context, string, labels.Selector) ([]certificatesv1.ClusterTrustBundle, error) {
	return nil, f.down
}

func (f *fakeAPI) Forget(uid types.UID) { f.forgot = append(f.forgot, uid) }

var errDown = errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")

type testNode struct {
	pods     []*v1.Pod
	statuses map[types.UID]v1.PodStatus
	node     *v1.Node
}

// statusVersion stands for the status store's version: it changes when the
// status does.
func statusVersion(st v1.PodStatus) uint64 {
	b, _ := json.Marshal(st)
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func newManager(t *testing.T, dir string, secrets bool, tn *testNode) *Manager {
	t.Helper()
	m, err := NewManager(ManagerConfig{
		Dir: dir, Secrets: secrets,
		Pods: func() []*v1.Pod { return tn.pods },
		Status: func(uid types.UID) (v1.PodStatus, uint64, bool) {
			st, ok := tn.statuses[uid]
			return st, statusVersion(st), ok
		},
		Node:  func() *v1.Node { return tn.node },
		Clock: clocktesting.NewFakeClock(time.Unix(1700000000, 0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewManagerValidates(t *testing.T) {
	for _, cfg := range []ManagerConfig{
		{Pods: func() []*v1.Pod { return nil }, Status: func(types.UID) (v1.PodStatus, uint64, bool) { return v1.PodStatus{}, 0, false }},
		{Dir: t.TempDir(), Status: func(types.UID) (v1.PodStatus, uint64, bool) { return v1.PodStatus{}, 0, false }},
		{Dir: t.TempDir(), Pods: func() []*v1.Pod { return nil }},
	} {
		if _, err := NewManager(cfg); err == nil {
			t.Errorf("NewManager(%+v) accepted", cfg)
		}
	}
}

// TestGetterAndRestore: what the API server answered is kept, written with
// the pod's entry, and served after a restart while it does not answer;
// Secrets only when allowed; answers (NotFound) are never overridden.
func TestGetterAndRestore(t *testing.T) {
	for _, secrets := range []bool{false, true} {
		t.Run(map[bool]string{false: "without secrets", true: "with secrets"}[secrets], func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "offline")
			p := pod("u1", "web")
			p.Spec.Volumes = []v1.Volume{
				{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
				{Name: "pw", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "pw"}}},
				{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			}
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns"}, Data: map[string]string{"k": "v"}}
			sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pw", Namespace: "ns"}, Data: map[string][]byte{"p": []byte("s3cret")}}
			pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"}, Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv1"}}
			pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: v1.PersistentVolumeSpec{
				PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi", VolumeHandle: "h"}}}}
			drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "hostpath.csi"}}
			api := &fakeAPI{objs: map[string]any{"cm/ns/cfg": cm, "secret/ns/pw": sec}, token: "tok"}
			client := fake.NewClientset(pvc, pv, drv)
			env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
			services := func(string, bool) (map[string]string, error) { return env, nil }

			tn := &testNode{pods: []*v1.Pod{p}, statuses: map[types.UID]v1.PodStatus{}, node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1"}}}
			m := newManager(t, dir, secrets, tn)
			g := m.Getter(api, client, services)
			if _, err := g.ConfigMap(ctx, "ns", "cfg"); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Secret(ctx, "ns", "pw"); err != nil {
				t.Fatal(err)
			}
			if tok, err := g.Token(ctx, p, "default", "", 3607); err != nil || tok != "tok" {
				t.Fatalf("Token: %q %v", tok, err)
			}
			if _, err := g.PersistentVolumeClaim(ctx, "ns", "data"); err != nil {
				t.Fatal(err)
			}
			if _, err := g.PersistentVolume(ctx, "pv1"); err != nil {
				t.Fatal(err)
			}
			if _, err := g.CSIDriver(ctx, "hostpath.csi"); err != nil {
				t.Fatal(err)
			}
			if _, err := g.ServiceEnv("ns", true); err != nil {
				t.Fatal(err)
			}
			m.Save(ctx)
			if files, _ := os.ReadDir(filepath.Join(dir, "pods")); len(files) != 0 {
				t.Fatalf("a pod without a status (not run yet) was checkpointed: %v", files)
			}
			tn.statuses["u1"] = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.1.1.1"}
			m.Save(ctx)
			b, err := os.ReadFile(filepath.Join(dir, "pods", "u1.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), "czNjcmV0"); got != secrets { // base64 of s3cret
				t.Errorf("the entry holds the Secret: %v, want %v", got, secrets)
			}
			if fi, _ := os.Stat(filepath.Join(dir, "node.json")); fi == nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("node.json: %v", fi)
			}

			// Restarted while the API server is gone.
			api2 := &fakeAPI{down: errDown}
			client2 := fake.NewClientset()
			client2.PrependReactor("get", "*", func(_ k8stesting.Action) (bool, runtime.Object, error) { return true, nil, errDown })
			m2 := newManager(t, dir, secrets, &testNode{})
			pods := m2.Restore(ctx)
			if len(pods) != 1 || pods[0].UID != "u1" || pods[0].Status.PodIP != "10.1.1.1" {
				t.Fatalf("restored %+v", pods)
			}
			if !m2.Restored("u1") || m2.Node() == nil || m2.Node().Name != "n" {
				t.Fatalf("restored %v, node %v", m2.Restored("u1"), m2.Node())
			}
			g2 := m2.Getter(api2, client2, func(string, bool) (map[string]string, error) { return nil, errors.New("not synced") })
			if got, err := g2.ConfigMap(ctx, "ns", "cfg"); err != nil || got.Data["k"] != "v" {
				t.Errorf("ConfigMap offline: %v %v", got, err)
			}
			got, err := g2.Secret(ctx, "ns", "pw")
			if secrets && (err != nil || string(got.Data["p"]) != "s3cret") {
				t.Errorf("Secret offline with secrets: %v %v", got, err)
			}
			if !secrets && (err == nil || !strings.Contains(err.Error(), "--offline-secrets is off")) {
				t.Errorf("Secret offline without secrets: %v", err)
			}
			if tok, err := g2.Token(ctx, pods[0], "default", "", 3607); err != nil || tok != "tok" {
				t.Errorf("Token offline: %q %v", tok, err)
			}
			if _, err := g2.Token(ctx, pods[0], "default", "vault", 3607); err == nil {
				t.Error("a token never requested served offline")
			}
			if o, err := g2.PersistentVolumeClaim(ctx, "ns", "data"); err != nil || o.Spec.VolumeName != "pv1" {
				t.Errorf("PVC offline: %v %v", o, err)
			}
			if o, err := g2.PersistentVolume(ctx, "pv1"); err != nil || o.Spec.CSI.Driver != "hostpath.csi" {
				t.Errorf("PV offline: %v %v", o, err)
			}
			if _, err := g2.CSIDriver(ctx, "hostpath.csi"); err != nil {
				t.Errorf("CSIDriver offline: %v", err)
			}
			if e, err := g2.ServiceEnv("ns", true); err != nil || e["KUBERNETES_SERVICE_HOST"] != "10.0.0.1" {
				t.Errorf("service env offline: %v %v", e, err)
			}
			if _, err := g2.ConfigMap(ctx, "ns", "other"); err == nil || !strings.Contains(err.Error(), "has no ConfigMap ns/other") {
				t.Errorf("an object never read: %v", err)
			}
			if st := m2.State(); len(st.FromCheckpoint) != 1 || st.Entries != 1 {
				t.Errorf("state %+v", st)
			}

			// The API server answers NotFound: not overridden, and dropped.
			api2.down = nil
			api2.objs = map[string]any{}
			if _, err := g2.ConfigMap(ctx, "ns", "cfg"); !apierrors.IsNotFound(err) {
				t.Errorf("NotFound overridden: %v", err)
			}
			api2.down = errDown
			if _, err := g2.ConfigMap(ctx, "ns", "cfg"); err == nil {
				t.Error("a ConfigMap the API server said is gone served offline")
			}
		})
	}
}

// TestSavePrune: entries are written when they change, never pruned before
// the API server is synced, then pruned for pods that are gone.
func TestSavePrune(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "offline")
	a, b := pod("a", "a"), pod("b", "b")
	tn := &testNode{pods: []*v1.Pod{a, b}, statuses: map[types.UID]v1.PodStatus{"a": {Phase: v1.PodRunning}, "b": {Phase: v1.PodRunning}}}
	m := newManager(t, dir, false, tn)
	m.Save(ctx)
	entry := filepath.Join(dir, "pods", "a.json")
	if err := os.Remove(entry); err != nil {
		t.Fatal(err)
	}
	m.Save(ctx) // unchanged: not written again
	if _, err := os.Stat(entry); !os.IsNotExist(err) {
		t.Error("an unchanged entry was written again")
	}
	tn.statuses["a"] = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.9"}
	m.Save(ctx)
	if e, _ := m.store.Load(); len(e) != 2 || e[0].Pod.Status.PodIP != "10.0.0.9" {
		t.Fatalf("after a status change: %+v", e)
	}
	tn.pods = []*v1.Pod{b}
	m.Save(ctx)
	if _, err := os.Stat(entry); err != nil {
		t.Fatal("pruned before the API server was synced")
	}
	m.Synced(ctx, []*v1.Pod{b})
	m.Save(ctx)
	if _, err := os.Stat(entry); !os.IsNotExist(err) {
		t.Errorf("the entry of a pod gone from the synced API server stays: %v", err)
	}
	if st := m.State(); st.Entries != 1 {
		t.Errorf("entries %d, want 1", st.Entries)
	}
}

// TestRestoreSkipsCorrupt: a corrupt entry is counted and skipped, the
// rest restored.
func TestRestoreSkipsCorrupt(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "offline")
	tn := &testNode{pods: []*v1.Pod{pod("a", "a"), pod("b", "b")}, statuses: map[types.UID]v1.PodStatus{"a": {}, "b": {}}}
	newManager(t, dir, false, tn).Save(ctx)
	path := filepath.Join(dir, "pods", "b.json")
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	m := newManager(t, dir, false, &testNode{})
	pods := m.Restore(ctx)
	if len(pods) != 1 || pods[0].UID != "a" {
		t.Fatalf("restored %v", pods)
	}
	st := m.State()
	if st.Corrupt != 1 || !strings.Contains(st.Describe(time.Now()), "1 corrupt entries skipped") {
		t.Errorf("state %+v: %s", st, st.Describe(time.Now()))
	}
}

// TestSaveSkipsUnchangedSources: a pod at the same resourceVersion, with
// the same status and nothing kept changed, is not rebuilt; a change of any
// of them (a ConfigMap the pod uses, a new token, the pod, its status) is
// written.
func TestSaveSkipsUnchangedSources(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "offline")
	p := pod("u1", "web")
	p.ResourceVersion = "7"
	p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}
	cm := func(rv, v string) *v1.ConfigMap {
		return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "ns", UID: "cm", ResourceVersion: rv}, Data: map[string]string{"k": v}}
	}
	api := &fakeAPI{objs: map[string]any{"cm/ns/cfg": cm("1", "one")}, token: "tok1"}
	tn := &testNode{pods: []*v1.Pod{p}, statuses: map[types.UID]v1.PodStatus{"u1": {Phase: v1.PodRunning}}}
	m := newManager(t, dir, false, tn)
	g := m.Getter(api, fake.NewClientset(), func(string, bool) (map[string]string, error) { return map[string]string{"A": "1"}, nil })
	read := func() {
		t.Helper()
		if _, err := g.ConfigMap(ctx, "ns", "cfg"); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Token(ctx, p, "default", "", 3607); err != nil {
			t.Fatal(err)
		}
		if _, err := g.ServiceEnv("ns", true); err != nil {
			t.Fatal(err)
		}
	}
	entry := filepath.Join(dir, "pods", "u1.json")
	saved := func() *Entry {
		t.Helper()
		m.Save(ctx)
		es, _ := m.store.Load()
		if len(es) != 1 {
			t.Fatalf("entries %d", len(es))
		}
		return es[0]
	}
	read()
	saved()
	gen := m.kept.gen.Load()
	read() // the same objects read again: nothing kept changes
	if m.kept.gen.Load() != gen {
		t.Errorf("reading unchanged objects changed the kept generation %d -> %d", gen, m.kept.gen.Load())
	}
	if err := os.Remove(entry); err != nil {
		t.Fatal(err)
	}
	m.Save(ctx)
	if _, err := os.Stat(entry); !os.IsNotExist(err) {
		t.Error("an unchanged entry was written again")
	}
	for _, c := range []struct {
		what   string
		change func()
		check  func(*Entry) bool
	}{
		{"a ConfigMap update", func() { api.objs["cm/ns/cfg"] = cm("2", "two"); read() },
			func(e *Entry) bool { return len(e.ConfigMaps) == 1 && e.ConfigMaps[0].Data["k"] == "two" }},
		{"a new token", func() { api.token = "tok2"; read() },
			func(e *Entry) bool { return len(e.Tokens) == 1 && e.Tokens[0].Value == "tok2" }},
		{"a status change", func() { tn.statuses["u1"] = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.9"} },
			func(e *Entry) bool { return e.Pod.Status.PodIP == "10.0.0.9" }},
		{"a pod update", func() {
			q := p.DeepCopy()
			q.ResourceVersion = "8"
			q.Labels = map[string]string{"l": "v"}
			tn.pods = []*v1.Pod{q}
		},
			func(e *Entry) bool { return e.Pod.Labels["l"] == "v" }},
	} {
		c.change()
		if e := saved(); !c.check(e) {
			t.Errorf("after %s the entry is %+v", c.what, e)
		}
	}
}
