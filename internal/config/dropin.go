package config

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/klog/v2"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

// dropInExt is the drop-in files' extension; other files are skipped.
const dropInExt = ".conf"

// mergeDropIns applies the KubeletConfiguration drop-ins of --config-dir
// (GA in 1.35) to cfg as upstream does: every *.conf file in dir and its
// subfolders, in lexical order of their paths, each a KubeletConfiguration
// (apiVersion and kind required) applied as a JSON merge patch (RFC 7386)
// over the configuration so far (defaults and --config), then defaulted
// again. Flags still win: the caller parses them afterwards. It reports
// nodelet's own offline fields and whether serializeImagePulls was given
// in a drop-in.
func mergeDropIns(ctx context.Context, cfg *kubeletv1beta1.KubeletConfiguration, dir string) (offlineFields, bool, error) {
	logger := klog.FromContext(ctx)
	var off offlineFields
	serializeSet := false
	base, err := json.Marshal(cfg)
	if err != nil {
		return off, false, fmt.Errorf("--config-dir: %w", err)
	}
	var applied, skipped []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if filepath.Ext(d.Name()) != dropInExt {
			skipped = append(skipped, path)
			return nil
		}
		patch, o, err := loadDropIn(ctx, path)
		if err != nil {
			return err
		}
		if o.Autonomy != nil {
			off.Autonomy = o.Autonomy
		}
		if o.Secrets != nil {
			off.Secrets = o.Secrets
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(patch, &fields) == nil {
			if _, ok := fields["serializeImagePulls"]; ok {
				serializeSet = true
			}
		}
		if base, err = jsonpatch.MergePatch(base, patch); err != nil {
			return fmt.Errorf("failed to merge drop-in %s into the kubelet configuration: %w", path, err)
		}
		applied = append(applied, path)
		return nil
	})
	if err != nil {
		return off, false, fmt.Errorf("failed to walk through kubelet dropin directory %q: %w", dir, err)
	}
	merged := &kubeletv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(base, merged); err != nil {
		return off, false, fmt.Errorf("--config-dir %s: the merged configuration: %w", dir, err)
	}
	SetDefaults(merged)
	*cfg = *merged
	logger.Info("Kubelet configuration drop-ins applied", "dir", dir, "files", applied)
	for _, s := range skipped {
		logger.V(4).Info("Skipped file in drop-in directory (does not have .conf extension)", "file", s)
	}
	return off, serializeSet, nil
}

// loadDropIn reads one drop-in as JSON (the fields it sets, nothing
// defaulted), with nodelet's offline fields split off; fields nodelet does
// not know are warned about, as in --config.
func loadDropIn(ctx context.Context, path string) ([]byte, offlineFields, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, offlineFields{}, fmt.Errorf("failed to load kubelet dropin file, path: %s, error: %w", path, err)
	}
	data, off, err := splitOffline(data)
	if err != nil {
		return nil, off, fmt.Errorf("kubelet dropin file %s: %w", path, err)
	}
	var typed kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &typed); err != nil {
		if lerr := yaml.Unmarshal(data, &typed); lerr != nil {
			return nil, off, fmt.Errorf("failed to load kubelet dropin file, path: %s, error: %w", path, lerr)
		}
		klog.FromContext(ctx).Info("Warning: kubelet dropin file has fields nodelet does not know; they are ignored", "path", path, "err", err)
	}
	if typed.APIVersion == "" && typed.Kind == "" {
		return nil, off, fmt.Errorf("failed to load kubelet dropin file, path: %s, no apiVersion/kind", path)
	}
	if typed.Kind != "KubeletConfiguration" || typed.APIVersion != kubeletv1beta1.SchemeGroupVersion.String() {
		return nil, off, fmt.Errorf("failed to load kubelet dropin file, path: %s, unknown apiVersion/kind: %s, Kind=%s", path, typed.APIVersion, typed.Kind)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, off, fmt.Errorf("failed to load kubelet dropin file, path: %s, error: %w", path, err)
	}
	return js, off, nil
}
