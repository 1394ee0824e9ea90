package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/e2e/framework"
)

// TestClusterCredentialProviders: image credential provider plugins
// (--image-credential-provider-config, --image-credential-provider-bin-dir),
// our provider test/fakes/credprovider speaking credentialprovider.kubelet.k8s.io/v1.
//   - creds (service account token mode: audience, a required annotation,
//     cacheType ServiceAccount) gives the private registry's password: a
//     pod whose service account has the annotation pulls the private image
//     (PullAlways) with it, the plugin having received a token for the
//     audience and the annotation; a second pod of the same service account
//     is served from the provider's cache (one exec);
//   - broken (exits 1) matches the same registry: every pull gets a Warning
//     FailedCredentialProvider event naming it, and a pod whose service
//     account lacks the annotation (creds skipped, as upstream) fails with
//     ErrImagePull naming broken;
//   - the provider metrics are on /metrics.
func TestClusterCredentialProviders(t *testing.T) {
	name := "e2e-credprovider"
	c := framework.RequireCluster(t)
	env := stackEnv(t, c, "PRIVATE_REGISTRY", "PRIVATE_REGISTRY_USER", "PRIVATE_REGISTRY_PASSWORD", "PRIVATE_IMAGE")
	bin, err := framework.BuildTool("./test/fakes/credprovider")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"creds", "broken"} {
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(binDir, p), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	password, requests := filepath.Join(dir, "password"), filepath.Join(dir, "requests.jsonl")
	writeTestFile(t, password, env["PRIVATE_REGISTRY_PASSWORD"]+"\n")
	const audience = "nodelet-e2e-registry"
	writeTestFile(t, filepath.Join(dir, "config.yaml"), fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: creds
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["%[1]s"]
  defaultCacheDuration: 10m
  args: ["--registry=%[1]s", "--username=%[2]s", "--password-file=%[3]s", "--log=%[4]s", "--require-token", "--cache-duration=10m"]
  tokenAttributes:
    serviceAccountTokenAudience: %[5]s
    cacheType: ServiceAccount
    requireServiceAccount: true
    requiredServiceAccountAnnotationKeys: ["domain.io/identity-id"]
    optionalServiceAccountAnnotationKeys: ["domain.io/identity-type"]
- name: broken
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  matchImages: ["%[1]s"]
  defaultCacheDuration: 10m
  args: ["--registry=%[1]s", "--mode=crash"]
`, env["PRIVATE_REGISTRY"], env["PRIVATE_REGISTRY_USER"], password, requests, audience))

	ctx := context.Background()
	// The node may request tokens for the plugin's audience (the API
	// server's ServiceAccountNodeAudienceRestriction).
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-credprovider-audience"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"request-serviceaccounts-token-audience"}, APIGroups: []string{""}, Resources: []string{audience}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-credprovider-audience"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: "rbac.authorization.k8s.io", Name: "system:nodes"}}}
	_ = c.Client.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	_ = c.Client.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})

	n := framework.NewClusterNodelet(t, c, name)
	n.ExtraArgs = append(n.ExtraArgs, "--image-credential-provider-config", filepath.Join(dir, "config.yaml"),
		"--image-credential-provider-bin-dir", binDir)
	n.Start()
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, func() bool {
		return c.NodeReady(t, name) == v1.ConditionTrue
	}, "node %s Ready", name)

	ns := c.Namespace(t, "credprovider")
	for sa, annotations := range map[string]map[string]string{
		"identified": {"domain.io/identity-id": "123456", "domain.io/identity-type": "serviceaccount"},
		"anonymous":  nil,
	} {
		if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &v1.ServiceAccount{
			ObjectMeta: metav1.ObjectMeta{Name: sa, Annotations: annotations}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(pod, sa string) {
		t.Helper()
		p := busyboxPod(pod, name, "sleep 3600")
		p.Spec.ServiceAccountName = sa
		p.Spec.Containers[0].Image = env["PRIVATE_IMAGE"]
		p.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	create("first", "identified")
	waitPod(t, c, ns, "first", 60*time.Second, "running with the provider's credentials", podReady)
	t.Logf("first: running %v after creation", time.Since(start).Round(100*time.Millisecond))
	create("second", "identified")
	waitPod(t, c, ns, "second", 60*time.Second, "running with the provider's cached credentials", podReady)
	create("refused", "anonymous")
	waitPod(t, c, ns, "refused", 60*time.Second, "ErrImagePull or ImagePullBackOff", func(p *v1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil &&
			(cs[0].State.Waiting.Reason == "ErrImagePull" || cs[0].State.Waiting.Reason == "ImagePullBackOff") &&
			strings.Contains(cs[0].State.Waiting.Message, "credential provider broken failed")
	})

	// The plugin ran once (the second pod was served from the cache), with
	// a token for the audience and the service account's annotations.
	data, err := os.ReadFile(requests)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		t.Fatalf("creds ran %d times, want once (the second pod from the cache; the anonymous one skipped):\n%s", len(lines), data)
	}
	var req struct {
		APIVersion                string            `json:"apiVersion"`
		Kind                      string            `json:"kind"`
		Image                     string            `json:"image"`
		ServiceAccountToken       string            `json:"serviceAccountToken"`
		ServiceAccountAnnotations map[string]string `json:"serviceAccountAnnotations"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &req); err != nil {
		t.Fatal(err)
	}
	if req.APIVersion != "credentialprovider.kubelet.k8s.io/v1" || req.Kind != "CredentialProviderRequest" ||
		!strings.HasPrefix(env["PRIVATE_IMAGE"], req.Image) || req.ServiceAccountToken == "" ||
		req.ServiceAccountAnnotations["domain.io/identity-id"] != "123456" || req.ServiceAccountAnnotations["domain.io/identity-type"] != "serviceaccount" {
		t.Errorf("the request creds got: %s", lines[0])
	}
	// The token is the service account's, for the audience.
	review, err := c.Client.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: req.ServiceAccountToken, Audiences: []string{audience}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:"+ns+":identified" {
		t.Errorf("the plugin's token: %+v", review.Status)
	}

	// The broken provider is named in a Warning event of each pod.
	for _, pod := range []string{"first", "refused"} {
		found := false
		for _, e := range podEvents(t, c, ns, pod) {
			found = found || e.Type == v1.EventTypeWarning && e.Reason == "FailedCredentialProvider" && strings.Contains(e.Message, "credential provider broken failed")
		}
		if !found {
			t.Errorf("%s: no FailedCredentialProvider event naming broken", pod)
		}
	}
	code, metrics := c.KubeletAPI(t, n, framework.APICredentials{CertName: "apiserver-kubelet-client"}, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{`kubelet_credential_provider_plugin_errors_total{plugin_name="broken"}`, `kubelet_credential_provider_plugin_duration_count{plugin_name="creds"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "credential_provider"))
		}
	}
}
