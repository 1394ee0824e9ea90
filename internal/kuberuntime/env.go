package kuberuntime

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/podspec"
)

// ObjectGetter reads the ConfigMaps and Secrets that env refers to
// (internal/volumes' cached API getter in cluster mode).
type ObjectGetter interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// ServiceEnv returns the service environment variables of a pod in
// namespace (the cluster's "kubernetes" service always, the namespace's
// services when enableServiceLinks), or an error while services are unknown.
type ServiceEnv func(namespace string, enableServiceLinks bool) (map[string]string, error)

// buildEnv computes a container's environment as upstream does: envFrom
// sources first (in order, with their prefix; keys that are not valid
// variable names are skipped and reported), then env (values expanded with
// $(VAR) against what is defined so far and the service variables), then
// the service variables not otherwise defined. A later definition of a name
// replaces an earlier one. A required ConfigMap, Secret or key that is
// missing is an error (CreateContainerConfigError). A fileKeyRef reads
// its key from a file in one of the pod's volumes (volumePaths: name ->
// host path), as the container is created, so after the init containers
// that wrote it.
func (m *Manager) buildEnv(ctx context.Context, pod *v1.Pod, c *v1.Container, facts podFacts, volumePaths map[string]string) ([]*runtimeapi.KeyValue, []string, error) {
	var order []string
	values := map[string]string{}
	set := func(k, v string) {
		if _, ok := values[k]; !ok {
			order = append(order, k)
		}
		values[k] = v
	}
	var invalid []string

	var services map[string]string
	if m.cfg.ServiceEnv != nil {
		links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
		s, err := m.cfg.ServiceEnv(pod.Namespace, links)
		if err != nil {
			return nil, nil, err
		}
		services = s
	}

	for _, from := range c.EnvFrom {
		name, optional, secret := "", false, from.SecretRef != nil
		switch {
		case from.ConfigMapRef != nil:
			name, optional = from.ConfigMapRef.Name, from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional
		case secret:
			name, optional = from.SecretRef.Name, from.SecretRef.Optional != nil && *from.SecretRef.Optional
		}
		data, err := m.objectData(ctx, pod.Namespace, name, secret)
		if err != nil {
			if optional && apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, err
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := from.Prefix + k
			if errs := validation.IsRelaxedEnvVarName(name); len(errs) > 0 {
				invalid = append(invalid, name)
				continue
			}
			set(name, data[k])
		}
	}

	lookup := func(name string) (string, bool) {
		if v, ok := values[name]; ok {
			return v, true
		}
		v, ok := services[name]
		return v, ok
	}
	for _, e := range c.Env {
		value := e.Value
		switch src := e.ValueFrom; {
		case src == nil:
			value = expand(value, lookup)
		case src.FieldRef != nil:
			v, err := podspec.FieldValue(pod, src.FieldRef.FieldPath, facts.PodIPs, facts.HostIPs)
			if err != nil {
				return nil, nil, fmt.Errorf("env %q: %w", e.Name, err)
			}
			value = v
		case src.ResourceFieldRef != nil:
			v, err := m.resourceValue(pod, c, src.ResourceFieldRef)
			if err != nil {
				return nil, nil, fmt.Errorf("env %q: %w", e.Name, err)
			}
			value = v
		case src.ConfigMapKeyRef != nil || src.SecretKeyRef != nil:
			ref, secret, kind := src.ConfigMapKeyRef, false, "ConfigMap"
			if ref == nil {
				ref = &v1.ConfigMapKeySelector{LocalObjectReference: src.SecretKeyRef.LocalObjectReference,
					Key: src.SecretKeyRef.Key, Optional: src.SecretKeyRef.Optional}
				secret, kind = true, "Secret"
			}
			optional := ref.Optional != nil && *ref.Optional
			data, err := m.objectData(ctx, pod.Namespace, ref.Name, secret)
			if err != nil {
				if optional && apierrors.IsNotFound(err) {
					continue
				}
				return nil, nil, err
			}
			v, ok := data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, nil, fmt.Errorf("couldn't find key %s in %s %s/%s", ref.Key, kind, pod.Namespace, ref.Name)
			}
			value = v
		case src.FileKeyRef != nil:
			v, ok, err := fileKeyValue(src.FileKeyRef, volumePaths)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				continue
			}
			value = v
		default:
			return nil, nil, fmt.Errorf("env %q: unsupported valueFrom", e.Name)
		}
		set(e.Name, value)
	}

	keys := make([]string, 0, len(services))
	for k := range services {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := values[k]; !ok {
			set(k, services[k])
		}
	}
	out := make([]*runtimeapi.KeyValue, 0, len(order))
	for _, k := range order {
		out = append(out, &runtimeapi.KeyValue{Key: k, Value: []byte(values[k])})
	}
	return out, invalid, nil
}

// objectData is the data of a ConfigMap, or of a Secret (secret true).
func (m *Manager) objectData(ctx context.Context, ns, name string, secret bool) (map[string]string, error) {
	if m.cfg.Objects == nil {
		return nil, fmt.Errorf("%q: ConfigMaps and Secrets need an API server", name)
	}
	if !secret {
		cm, err := m.cfg.Objects.ConfigMap(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		return cm.Data, nil
	}
	sec, err := m.cfg.Objects.Secret(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	data := make(map[string]string, len(sec.Data))
	for k, v := range sec.Data {
		data[k] = string(v)
	}
	return data, nil
}

// resourceValue is a resourceFieldRef's value; the container defaults to
// the one whose environment this is.
func (m *Manager) resourceValue(pod *v1.Pod, self *v1.Container, ref *v1.ResourceFieldSelector) (string, error) {
	r := *ref
	if r.ContainerName == "" {
		r.ContainerName = self.Name
	}
	var alloc v1.ResourceList
	if m.cfg.NodeAllocatable != nil {
		alloc = m.cfg.NodeAllocatable()
	}
	return podspec.ResourceFieldValue(pod, &r, alloc)
}
