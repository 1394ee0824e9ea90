package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// The pod-resources API on <root-dir>/pod-resources/kubelet.sock, read
// with the podresources v1 and v1alpha1 clients as monitoring agents read
// it: List has the running pods with their containers and sidecars (not the
// plain init containers), Get one pod or upstream's not-found error,
// GetAllocatableResources answers (no devices, no CPU or memory manager
// assignments: the "none" policies); a removed pod leaves List.
func TestPodResourcesAPI(t *testing.T) {
	s := framework.RequireStack(t)
	n := framework.NewNodelet(t, s, "e2e-podres")
	n.Start()
	n.WriteManifest("web.yaml", podManifest("web", `  initContainers:
  - name: setup
    image: `+busybox+`
    command: ["true"]
  - name: proxy
    image: `+busybox+`
    restartPolicy: Always
    command: ["sleep", "3600"]
`, container("app", "sleep 3600"), container("log", "sleep 3600")))
	n.WriteManifest("db.yaml", podManifest("db", "", container("db", "sleep 3600")))
	web, db := n.PodName("web"), n.PodName("db")
	waitRunning(t, s, web, "log", 90*time.Second)
	waitRunning(t, s, db, "db", 90*time.Second)

	sock := filepath.Join(n.RootDir, "pod-resources", "kubelet.sock")
	st, err := os.Stat(sock)
	if err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("%s: %v %v", sock, st, err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := podresourcesv1.NewPodResourcesListerClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	listed := func() []string {
		t.Helper()
		resp, err := cl.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var out []string
		for _, p := range resp.PodResources {
			var cs []string
			for _, c := range p.Containers {
				cs = append(cs, c.Name)
				if len(c.Devices) > 0 || len(c.CpuIds) > 0 || len(c.Memory) > 0 {
					t.Errorf("container %s/%s has assignments: %v", p.Name, c.Name, c)
				}
			}
			out = append(out, p.Namespace+"/"+p.Name+":"+strings.Join(cs, ","))
		}
		sort.Strings(out)
		return out
	}
	want := []string{"default/" + db + ":db", "default/" + web + ":proxy,app,log"}
	if got := listed(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("List: %v, want %v", got, want)
	}

	g, err := cl.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "default", PodName: db})
	if err != nil || g.PodResources.Name != db || len(g.PodResources.Containers) != 1 {
		t.Errorf("Get %s: %v %v", db, g, err)
	}
	if _, err := cl.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "default", PodName: "missing"}); err == nil ||
		!strings.Contains(err.Error(), "pod missing in namespace default not found") {
		t.Errorf("Get of a missing pod: %v", err)
	}
	a, err := cl.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil || len(a.Devices) != 0 || len(a.CpuIds) != 0 || len(a.Memory) != 0 {
		t.Errorf("GetAllocatableResources: %v %v", a, err)
	}
	alpha, err := podresourcesv1alpha1.NewPodResourcesListerClient(conn).List(ctx, &podresourcesv1alpha1.ListPodResourcesRequest{})
	if err != nil || len(alpha.PodResources) != 2 {
		t.Errorf("v1alpha1 List: %v %v", alpha, err)
	}

	n.RemoveManifest("db.yaml")
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		got := listed()
		return len(got) == 1 && strings.HasPrefix(got[0], "default/"+web+":")
	}, "the removed pod %s leaves List", db)
}
