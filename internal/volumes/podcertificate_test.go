package volumes

import (
	"context"
	"errors"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// fakeCerts issues "key-<volume>-<index>" and "chain"; not yet for index 9.
type fakeCerts struct{}

func (fakeCerts) GetPodCertificateCredentialBundle(_ context.Context, ns, pod, uid, volume string, index int) ([]byte, []byte, error) {
	if index == 9 {
		return nil, nil, errors.New("credential bundle is not issued yet")
	}
	return []byte(fmt.Sprintf("KEY(%s/%s/%s/%s/%d)", ns, pod, uid, volume, index)), []byte("CHAIN"), nil
}

func TestProjectPodCertificate(t *testing.T) {
	user := int64(1000)
	src := func(bundle, key, chain string) v1.VolumeProjection {
		return v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519",
			CredentialBundlePath: bundle, KeyPath: key, CertificateChainPath: chain}}
	}
	key1 := "KEY(ns/p/u1/v/1)"
	for _, tc := range []struct {
		name    string
		sources []v1.VolumeProjection
		sc      *v1.PodSecurityContext
		want    map[string]file
		wantErr string
	}{
		{name: "every file, the source's index",
			sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{}}, src("bundle.pem", "key.pem", "chain.pem")},
			want: map[string]file{"bundle.pem": {[]byte(key1 + "CHAIN"), 0o644, -1}, "key.pem": {[]byte(key1), 0o644, -1},
				"chain.pem": {[]byte("CHAIN"), 0o644, -1}}},
		{name: "only the bundle, fsGroup: 0600",
			sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{}}, src("b", "", "")},
			sc:      &v1.PodSecurityContext{FSGroup: ptr.To(int64(2000))},
			want:    map[string]file{"b": {[]byte(key1 + "CHAIN"), 0o600, -1}}},
		{name: "one user: owned by it",
			sources: []v1.VolumeProjection{{DownwardAPI: &v1.DownwardAPIProjection{}}, src("", "k", "")},
			sc:      &v1.PodSecurityContext{RunAsUser: &user},
			want:    map[string]file{"k": {[]byte(key1), 0o600, 1000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, ManagerConfig{PodsDir: t.TempDir(), PodCertificates: fakeCerts{}})
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
				Spec: v1.PodSpec{SecurityContext: tc.sc, Containers: []v1.Container{{Name: "c"}}}}
			vol := &v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: tc.sources, DefaultMode: ptr.To(int32(0o644))}}}
			files, err := m.project(context.Background(), pod, vol)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != len(tc.want) {
				t.Fatalf("files %v; want %v", files, tc.want)
			}
			for p, w := range tc.want {
				f := files[p]
				if string(f.data) != string(w.data) || f.mode != w.mode || f.uid != w.uid {
					t.Errorf("%s: %q %o %d; want %q %o %d", p, f.data, f.mode, f.uid, w.data, w.mode, w.uid)
				}
			}
		})
	}
	// Not issued yet: the manager's error fails the mount.
	m := newManager(t, ManagerConfig{PodsDir: t.TempDir(), PodCertificates: fakeCerts{}})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	srcs := make([]v1.VolumeProjection, 10)
	for i := range srcs {
		srcs[i] = v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{}}
	}
	srcs[9] = src("b", "", "")
	_, err := m.project(context.Background(), pod, &v1.Volume{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: srcs}}})
	if err == nil || err.Error() != "credential bundle is not issued yet" {
		t.Errorf("error %v", err)
	}
}
