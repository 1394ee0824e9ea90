package volumes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nodelet/nodelet/internal/podspec"
)

// file is one projected file.
type file struct {
	data []byte
	mode os.FileMode
	// uid owns the file when >= 0 (a service account token for the pod's
	// only user); else root.
	uid int
}

// errNoAPI: static pods cannot reference API objects, as upstream.
var errNoAPI = errors.New("needs the API server: static pods cannot use configMap, secret, service account token or clusterTrustBundle volumes")

// project computes the files of a configMap, secret, downwardAPI or
// projected volume (configMap, secret, downwardAPI, serviceAccountToken and
// clusterTrustBundle sources).
func (m *Manager) project(ctx context.Context, pod *v1.Pod, v *v1.Volume) (map[string]file, error) {
	src := v.VolumeSource
	files := map[string]file{}
	switch {
	case src.ConfigMap != nil:
		return files, m.configMap(ctx, pod, &v1.ConfigMapProjection{LocalObjectReference: src.ConfigMap.LocalObjectReference,
			Items: src.ConfigMap.Items, Optional: src.ConfigMap.Optional}, mode(src.ConfigMap.DefaultMode, 0o644), files)
	case src.Secret != nil:
		return files, m.secret(ctx, pod, &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: src.Secret.SecretName},
			Items: src.Secret.Items, Optional: src.Secret.Optional}, mode(src.Secret.DefaultMode, 0o644), files)
	case src.DownwardAPI != nil:
		return files, m.downward(pod, src.DownwardAPI.Items, mode(src.DownwardAPI.DefaultMode, 0o644), files)
	case src.Projected != nil:
		def := mode(src.Projected.DefaultMode, 0o644)
		for i, s := range src.Projected.Sources {
			var err error
			switch {
			case s.ConfigMap != nil:
				err = m.configMap(ctx, pod, s.ConfigMap, def, files)
			case s.Secret != nil:
				err = m.secret(ctx, pod, s.Secret, def, files)
			case s.DownwardAPI != nil:
				err = m.downward(pod, s.DownwardAPI.Items, def, files)
			case s.ServiceAccountToken != nil:
				err = m.token(ctx, pod, s.ServiceAccountToken, def, files)
			case s.ClusterTrustBundle != nil:
				err = m.clusterTrustBundle(ctx, pod, s.ClusterTrustBundle, def, files)
			case s.PodCertificate != nil:
				err = m.podCertificate(ctx, pod, v.Name, i, s.PodCertificate, def, files)
			default:
				err = errors.New("unsupported projected source")
			}
			if err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	return nil, fmt.Errorf("not a projected volume")
}

func mode(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m) & 0o777
}

func (m *Manager) configMap(ctx context.Context, pod *v1.Pod, p *v1.ConfigMapProjection, def os.FileMode, files map[string]file) error {
	if m.getter == nil {
		return errNoAPI
	}
	cm, err := m.getter.ConfigMap(ctx, pod.Namespace, p.Name)
	if apierrors.IsNotFound(err) && p.Optional != nil && *p.Optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("configmap %q: %w", p.Name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return items(data, p.Items, p.Optional, def, files, "configmap "+p.Name)
}

func (m *Manager) secret(ctx context.Context, pod *v1.Pod, p *v1.SecretProjection, def os.FileMode, files map[string]file) error {
	if m.getter == nil {
		return errNoAPI
	}
	s, err := m.getter.Secret(ctx, pod.Namespace, p.Name)
	if apierrors.IsNotFound(err) && p.Optional != nil && *p.Optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("secret %q: %w", p.Name, err)
	}
	return items(s.Data, p.Items, p.Optional, def, files, "secret "+p.Name)
}

func (m *Manager) token(ctx context.Context, pod *v1.Pod, p *v1.ServiceAccountTokenProjection, def os.FileMode, files map[string]file) error {
	if m.getter == nil {
		return errNoAPI
	}
	exp := int64(3600)
	if p.ExpirationSeconds != nil {
		exp = *p.ExpirationSeconds
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tok, err := m.getter.Token(ctx, pod, sa, p.Audience, exp)
	if err != nil {
		return err
	}
	files[p.Path] = ownedFile(pod, []byte(tok), def)
	return nil
}

// ownedFile is a service account token's or a trust bundle's file, as
// upstream: with an fsGroup, or when every container runs as the same user,
// it is readable by its owner only (then the fsGroup's read bits are
// added), owned by that user; else it has the volume's default mode.
func ownedFile(pod *v1.Pod, data []byte, def os.FileMode) file {
	f := file{data: data, mode: def, uid: -1}
	fsUser := fsUserOf(pod)
	if fsUser != nil || (pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.FSGroup != nil) {
		f.mode = 0o600
	}
	if fsUser != nil {
		f.uid = int(*fsUser)
	}
	return f
}

// fsUserOf is the user every container of the pod runs as, nil when they
// differ or one does not say (upstream's FsUserFrom).
func fsUserOf(pod *v1.Pod) *int64 {
	var user *int64
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			var u *int64
			if sc := list[i].SecurityContext; sc != nil && sc.RunAsUser != nil {
				u = sc.RunAsUser
			} else if psc := pod.Spec.SecurityContext; psc != nil {
				u = psc.RunAsUser
			}
			if u == nil || (user != nil && *user != *u) {
				return nil
			}
			user = u
		}
	}
	return user
}

// items selects keys into files: all keys when items is empty.
func items(data map[string][]byte, list []v1.KeyToPath, optional *bool, def os.FileMode, files map[string]file, what string) error {
	if len(list) == 0 {
		for k, v := range data {
			files[k] = file{data: v, mode: def, uid: -1}
		}
		return nil
	}
	for _, it := range list {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		files[it.Path] = file{data: v, mode: mode(it.Mode, def), uid: -1}
	}
	return nil
}

func (m *Manager) downward(pod *v1.Pod, list []v1.DownwardAPIVolumeFile, def os.FileMode, files map[string]file) error {
	var allocatable v1.ResourceList
	for _, it := range list {
		var val string
		switch {
		case it.FieldRef != nil:
			v, err := podspec.FieldValue(pod, it.FieldRef.FieldPath, nil, nil)
			if err != nil {
				return fmt.Errorf("downwardAPI %q: %w", it.Path, err)
			}
			val = v
		case it.ResourceFieldRef != nil:
			if allocatable == nil && m.cfg.Allocatable != nil {
				allocatable = m.cfg.Allocatable()
			}
			v, err := podspec.ResourceFieldValue(pod, it.ResourceFieldRef, allocatable)
			if err != nil {
				return fmt.Errorf("downwardAPI %q: %w", it.Path, err)
			}
			val = v
		default:
			return fmt.Errorf("downwardAPI %q: neither fieldRef nor resourceFieldRef", it.Path)
		}
		files[it.Path] = file{data: []byte(val), mode: mode(it.Mode, def), uid: -1}
	}
	return nil
}

// writeAtomic writes files into dir as upstream's atomic writer does: into a
// fresh timestamped directory, then a ..data symlink swapped in one rename,
// and one symlink per top-level name through ..data. A reader never sees a
// half-written update. Nothing is written when the content is unchanged.
// With gid >= 0 (the pod's fsGroup) everything written gets that group and
// directories setgid, as upstream's ownership walk after a write would do
// (the files' modes already include the group bits).
func writeAtomic(dir string, files map[string]file, gid int) error {
	for p := range files {
		clean := path.Clean(p)
		if path.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") || strings.HasPrefix(clean, "..") {
			return fmt.Errorf("invalid path %q", p)
		}
	}
	if same(dir, files, gid) {
		return nil
	}
	dirMode := os.FileMode(0o755)
	if gid >= 0 {
		dirMode |= os.ModeSetgid
	}
	mkdir := func(p string) error {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		return own(p, -1, gid, dirMode)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tsDir := filepath.Join(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05.")+hex.EncodeToString(rnd[:]))
	if err := mkdir(tsDir); err != nil {
		return err
	}
	for p, f := range files {
		full := filepath.Join(tsDir, p)
		for d := filepath.Dir(full); d != tsDir; d = filepath.Dir(d) {
			if err := mkdir(d); err != nil {
				return err
			}
		}
		if err := os.WriteFile(full, f.data, f.mode); err != nil {
			return err
		}
		if err := own(full, f.uid, gid, f.mode); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := symlink(filepath.Base(tsDir), tmp, gid); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	top := map[string]bool{}
	for p := range files {
		top[strings.SplitN(path.Clean(p), "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join("..data", name) {
			continue
		}
		_ = os.Remove(link)
		if err := symlink(filepath.Join("..data", name), link, gid); err != nil {
			return err
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "..") && !top[n] {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
	if old != "" && old != filepath.Base(tsDir) {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

// own sets a file's owner (uid, gid: -1 leaves them) and then its mode (a
// chown may clear setgid).
func own(p string, uid, gid int, mode os.FileMode) error {
	if uid >= 0 || gid >= 0 {
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
	}
	return os.Chmod(p, mode)
}

func symlink(target, link string, gid int) error {
	if err := os.Symlink(target, link); err != nil {
		return err
	}
	if gid >= 0 {
		return os.Lchown(link, -1, gid)
	}
	return nil
}

// same reports whether dir's current ..data holds exactly files, with their
// modes and owners.
func same(dir string, files map[string]file, gid int) bool {
	cur := filepath.Join(dir, "..data")
	if _, err := os.Stat(cur); err != nil {
		return false
	}
	n := 0
	err := filepath.WalkDir(cur+"/", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(cur, p)
		f, ok := files[rel]
		if !ok {
			return errors.New("extra")
		}
		data, err := os.ReadFile(p)
		if err != nil || string(data) != string(f.data) {
			return errors.New("differs")
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm() != f.mode {
			return errors.New("mode")
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			if (gid >= 0 && int(st.Gid) != gid) || (f.uid >= 0 && int(st.Uid) != f.uid) {
				return errors.New("owner")
			}
		}
		return nil
	})
	return err == nil && n == len(files)
}

// podCertificate writes a podCertificate source's files as upstream: the
// credential bundle (the PEM private key, then the chain), the key alone,
// the chain alone, each where the source says; the mode is that of a
// token (ownedFile). The manager's error (not issued yet, denied) fails
// the mount.
func (m *Manager) podCertificate(ctx context.Context, pod *v1.Pod, volume string, index int, p *v1.PodCertificateProjection, def os.FileMode, files map[string]file) error {
	if m.cfg.PodCertificates == nil {
		return errors.New("podCertificate projected volumes need the API server and the feature gate PodCertificateRequest")
	}
	key, chain, err := m.cfg.PodCertificates.GetPodCertificateCredentialBundle(ctx, pod.Namespace, pod.Name, string(pod.UID), volume, index)
	if err != nil {
		return err
	}
	if p.CredentialBundlePath != "" {
		files[p.CredentialBundlePath] = ownedFile(pod, append(append([]byte{}, key...), chain...), def)
	}
	if p.KeyPath != "" {
		files[p.KeyPath] = ownedFile(pod, key, def)
	}
	if p.CertificateChainPath != "" {
		files[p.CertificateChainPath] = ownedFile(pod, chain, def)
	}
	return nil
}
