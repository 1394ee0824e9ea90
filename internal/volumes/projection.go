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
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// file is one projected file.
type file struct {
	data []byte
	mode os.FileMode
}

// errNoAPI: static pods cannot reference API objects, as upstream.
var errNoAPI = errors.New("needs the API server: static pods cannot use configMap, secret or service account token volumes")

// project computes the files of a configMap, secret, downwardAPI or
// projected volume.
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
		return files, downward(pod, src.DownwardAPI.Items, mode(src.DownwardAPI.DefaultMode, 0o644), files)
	case src.Projected != nil:
		def := mode(src.Projected.DefaultMode, 0o644)
		for _, s := range src.Projected.Sources {
			var err error
			switch {
			case s.ConfigMap != nil:
				err = m.configMap(ctx, pod, s.ConfigMap, def, files)
			case s.Secret != nil:
				err = m.secret(ctx, pod, s.Secret, def, files)
			case s.DownwardAPI != nil:
				err = downward(pod, s.DownwardAPI.Items, def, files)
			case s.ServiceAccountToken != nil:
				err = m.token(ctx, pod, s.ServiceAccountToken, def, files)
			default:
				err = errors.New("unsupported projected source (clusterTrustBundle, podCertificate)")
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
	files[p.Path] = file{data: []byte(tok), mode: def}
	return nil
}

// items selects keys into files: all keys when items is empty.
func items(data map[string][]byte, list []v1.KeyToPath, optional *bool, def os.FileMode, files map[string]file, what string) error {
	if len(list) == 0 {
		for k, v := range data {
			files[k] = file{data: v, mode: def}
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
		files[it.Path] = file{data: v, mode: mode(it.Mode, def)}
	}
	return nil
}

func downward(pod *v1.Pod, list []v1.DownwardAPIVolumeFile, def os.FileMode, files map[string]file) error {
	for _, it := range list {
		if it.FieldRef == nil {
			return fmt.Errorf("downwardAPI %q: only fieldRef is supported yet", it.Path)
		}
		var val string
		switch fp := it.FieldRef.FieldPath; fp {
		case "metadata.name":
			val = pod.Name
		case "metadata.namespace":
			val = pod.Namespace
		case "metadata.uid":
			val = string(pod.UID)
		case "metadata.labels":
			val = formatMap(pod.Labels)
		case "metadata.annotations":
			val = formatMap(pod.Annotations)
		default:
			return fmt.Errorf("downwardAPI %q: unsupported fieldRef %q", it.Path, fp)
		}
		files[it.Path] = file{data: []byte(val), mode: mode(it.Mode, def)}
	}
	return nil
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	return b.String()
}

// writeAtomic writes files into dir as upstream's atomic writer does: into a
// fresh timestamped directory, then a ..data symlink swapped in one rename,
// and one symlink per top-level name through ..data. A reader never sees a
// half-written update. Nothing is written when the content is unchanged.
func writeAtomic(dir string, files map[string]file) error {
	for p := range files {
		clean := path.Clean(p)
		if path.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") || strings.HasPrefix(clean, "..") {
			return fmt.Errorf("invalid path %q", p)
		}
	}
	if same(dir, files) {
		return nil
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tsDir := filepath.Join(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05.")+hex.EncodeToString(rnd[:]))
	if err := os.MkdirAll(tsDir, 0o755); err != nil {
		return err
	}
	for p, f := range files {
		full := filepath.Join(tsDir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(full, f.mode); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(tsDir), tmp); err != nil {
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
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
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

// same reports whether dir's current ..data holds exactly files.
func same(dir string, files map[string]file) bool {
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
		return nil
	})
	return err == nil && n == len(files)
}
