package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nodelet/nodelet/internal/volumes"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// pods is Pods over a list.
type pods []*v1.Pod

func (p pods) Pods() []*v1.Pod { return p }
func (p pods) PodByName(ns, name string) (*v1.Pod, bool) {
	for _, x := range p {
		if x.Namespace == ns && x.Name == name {
			return x, true
		}
	}
	return nil, false
}

// TestLocalPodDetails: /nodelet/pods lists every pod's details with its
// source (checkpoint while restored, else its annotations) and volumes,
// /nodelet/pods/{ns}/{pod} one, 404 for a pod the node does not run.
func TestLocalPodDetails(t *testing.T) {
	static := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-n1", UID: "u1", Annotations: map[string]string{"kubernetes.io/config.source": "file"}}}
	api := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u2"}}
	restored := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "old", UID: "u3", Annotations: map[string]string{"kubernetes.io/config.source": "api"}}}
	restored.Spec.Volumes = []v1.Volume{{Name: "v"}}
	s := &Server{cfg: Config{Kubelet: &kubeletv1beta1.KubeletConfiguration{},
		Restored:     func(uid types.UID) bool { return uid == "u3" },
		VolumeStates: func(types.UID) map[string]volumes.State { return nil },
	}, pods: pods{static, api, restored}, clock: clock.RealClock{}}
	h := s.localHandler()
	get := func(path string, v any) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return rec.Code
	}
	var list PodDetailsList
	if code := get("/nodelet/pods", &list); code != http.StatusOK || len(list.Items) != 3 {
		t.Fatalf("/nodelet/pods: %d %+v", code, list)
	}
	want := map[string]string{"u1": SourceFile, "u2": SourceAPI, "u3": SourceCheckpoint}
	for _, d := range list.Items {
		if d.Source != want[string(d.UID)] || d.Name == "" || d.Namespace == "" {
			t.Errorf("%+v: source want %q", d, want[string(d.UID)])
		}
	}
	var one PodDetails
	if code := get("/nodelet/pods/ns/old", &one); code != http.StatusOK || one.UID != "u3" || len(one.Volumes) != 1 || one.Source != SourceCheckpoint {
		t.Errorf("/nodelet/pods/ns/old: %d %+v", code, one)
	}
	if code := get("/nodelet/pods/ns/nope", &one); code != http.StatusNotFound {
		t.Errorf("a pod the node does not run: %d", code)
	}
}
