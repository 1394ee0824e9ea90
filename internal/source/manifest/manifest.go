package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/internal/podspec"
)

// Decode turns the bytes of one manifest (a file's or the manifest URL's
// answer) into defaulted, valid static pods. warnings lists fields that were
// ignored (unknown to v1.Pod).
func Decode(data []byte, from podspec.Origin, nodeName string) (pods []*v1.Pod, warnings []string, err error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, nil, err
	}
	if len(docs) == 0 {
		return nil, nil, errors.New("the manifest is empty")
	}
	for i, doc := range docs {
		got, warns, err := decodeDocument(doc)
		if err != nil {
			if len(docs) > 1 {
				return nil, nil, fmt.Errorf("document %d: %w", i+1, err)
			}
			return nil, nil, err
		}
		warnings = append(warnings, warns...)
		pods = append(pods, got...)
	}
	for _, pod := range pods {
		if err := podspec.ApplyStaticDefaults(pod, from, nodeName); err != nil {
			return nil, nil, err
		}
		if err := podspec.ValidationError(podspec.Validate(pod)); err != nil {
			return nil, nil, fmt.Errorf("pod %q: %w", pod.Name, err)
		}
	}
	return pods, warnings, nil
}

// splitDocuments returns the non-empty YAML documents of data as JSON.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("not valid YAML or JSON: %w", err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		docs = append(docs, js)
	}
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func decodeDocument(js []byte) ([]*v1.Pod, []string, error) {
	var tm typeMeta
	if err := yaml.Unmarshal(js, &tm); err != nil {
		return nil, nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if tm.APIVersion != "v1" {
		return nil, nil, fmt.Errorf("apiVersion %q is not supported: static pods must be apiVersion v1", tm.APIVersion)
	}
	switch tm.Kind {
	case "Pod":
		pod := &v1.Pod{}
		warns, err := unmarshal(js, pod)
		if err != nil {
			return nil, nil, err
		}
		return []*v1.Pod{pod}, warns, nil
	case "PodList":
		list := &v1.PodList{}
		warns, err := unmarshal(js, list)
		if err != nil {
			return nil, nil, err
		}
		pods := make([]*v1.Pod, 0, len(list.Items))
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
		return pods, warns, nil
	default:
		return nil, nil, fmt.Errorf("kind %q is not supported: a static pod manifest holds a Pod or a PodList", tm.Kind)
	}
}

// unmarshal decodes strictly first to name unknown fields, then leniently, as
// the API server accepts unknown fields with a warning.
func unmarshal(js []byte, into any) ([]string, error) {
	if err := yaml.UnmarshalStrict(js, into); err == nil {
		return nil, nil
	} else if lerr := yaml.Unmarshal(js, into); lerr != nil {
		return nil, fmt.Errorf("cannot decode: %w", lerr)
	} else {
		return []string{err.Error()}, nil
	}
}
