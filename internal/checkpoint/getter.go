package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nodelet/nodelet/internal/apiclient"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/internal/volumes"
)

// API is what the Getter reads through: the volumes' cached API getter.
type API interface {
	volumes.Getter
	Forget(uid types.UID)
}

// Unreachable reports whether err means the API server gave no answer (a
// connection error, a timeout, a 5xx or 429), as opposed to an answer such
// as NotFound or Forbidden, which the checkpoint never overrides.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := st.Status().Code
		return code >= 500 || code == 429
	}
	return true
}

// kept is the last copy of every API object the node's pods used: filled
// from the checkpoint at start and by every read through the Getter that
// the API server answered.
type kept struct {
	mu      sync.RWMutex
	secrets bool // Secrets may be kept
	objs    map[string]any
	// tokens by pod, then by what they were requested for.
	tokens map[types.UID]map[tokenID]string
	// env is the service environment by serviceEnvKey.
	env map[string]map[string]string
	// gen counts the changes of what k keeps: an entry built from k is the
	// same as the last one while gen (and the pod and its status) are.
	gen atomic.Uint64
}

func newKept(secrets bool) *kept {
	return &kept{secrets: secrets, objs: map[string]any{}, tokens: map[types.UID]map[tokenID]string{}, env: map[string]map[string]string{}}
}

func objKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// tokenID is what a token was requested for.
type tokenID struct {
	sa, audience string
	exp          int64
}

func serviceEnvKey(namespace string, links bool) string {
	return namespace + "/" + strconv.FormatBool(links)
}

func (k *kept) put(kind, namespace, name string, obj any) {
	if kind == "Secret" && !k.secrets {
		return
	}
	key := objKey(kind, namespace, name)
	k.mu.Lock()
	if old, ok := k.objs[key]; !ok || !sameVersion(old, obj) {
		k.gen.Add(1)
	}
	k.objs[key] = obj
	k.mu.Unlock()
}

// sameVersion: a and b are the same object at the same resourceVersion.
func sameVersion(a, b any) bool {
	if a == b {
		return true
	}
	oa, ok1 := a.(metav1.Object)
	ob, ok2 := b.(metav1.Object)
	return ok1 && ok2 && oa.GetResourceVersion() != "" && oa.GetResourceVersion() == ob.GetResourceVersion() && oa.GetUID() == ob.GetUID()
}

func (k *kept) drop(kind, namespace, name string) {
	key := objKey(kind, namespace, name)
	k.mu.Lock()
	if _, ok := k.objs[key]; ok {
		k.gen.Add(1)
		delete(k.objs, key)
	}
	k.mu.Unlock()
}

func (k *kept) get(kind, namespace, name string) (any, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	o, ok := k.objs[objKey(kind, namespace, name)]
	return o, ok
}

func (k *kept) putToken(uid types.UID, key tokenID, value string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tokens[uid] == nil {
		k.tokens[uid] = map[tokenID]string{}
	}
	if old, ok := k.tokens[uid][key]; !ok || old != value {
		k.gen.Add(1)
	}
	k.tokens[uid][key] = value
}

func (k *kept) token(uid types.UID, key tokenID) (string, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	v, ok := k.tokens[uid][key]
	return v, ok
}

func (k *kept) forgetPod(uid types.UID) {
	k.mu.Lock()
	if _, ok := k.tokens[uid]; ok {
		k.gen.Add(1)
		delete(k.tokens, uid)
	}
	k.mu.Unlock()
}

// add folds a checkpoint entry in (at start: nothing newer is known).
func (k *kept) add(e *Entry) {
	for _, o := range e.ConfigMaps {
		k.put("ConfigMap", o.Namespace, o.Name, o)
	}
	for _, o := range e.Secrets {
		k.put("Secret", o.Namespace, o.Name, o)
	}
	for _, o := range e.PersistentVolumeClaims {
		k.put("PersistentVolumeClaim", o.Namespace, o.Name, o)
	}
	for _, o := range e.PersistentVolumes {
		k.put("PersistentVolume", "", o.Name, o)
	}
	for _, o := range e.CSIDrivers {
		k.put("CSIDriver", "", o.Name, o)
	}
	for _, t := range e.Tokens {
		k.putToken(e.Pod.UID, tokenID{t.ServiceAccount, t.Audience, t.ExpirationSeconds}, t.Value)
	}
	if e.ServiceEnv != nil {
		k.putEnv(serviceEnvKey(e.Pod.Namespace, enableServiceLinks(e.Pod)), e.ServiceEnv)
	}
}

func (k *kept) putEnv(key string, env map[string]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.env[key]; !ok || !maps.Equal(old, env) {
		k.gen.Add(1)
	}
	k.env[key] = env
}

func enableServiceLinks(p *v1.Pod) bool {
	return p.Spec.EnableServiceLinks == nil || *p.Spec.EnableServiceLinks
}

// entry is what k keeps for pod, as an Entry without the pod.
func (k *kept) entry(pod *v1.Pod) Entry {
	refs := References(pod)
	ns := pod.Namespace
	var e Entry
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, n := range refs.ConfigMaps {
		if o, ok := k.objs[objKey("ConfigMap", ns, n)].(*v1.ConfigMap); ok {
			e.ConfigMaps = append(e.ConfigMaps, o)
		}
	}
	if k.secrets {
		for _, n := range refs.Secrets {
			if o, ok := k.objs[objKey("Secret", ns, n)].(*v1.Secret); ok {
				e.Secrets = append(e.Secrets, o)
			}
		}
	}
	drivers := set{}
	for _, d := range refs.InlineDrivers {
		drivers.add(d)
	}
	for _, n := range refs.Claims {
		pvc, ok := k.objs[objKey("PersistentVolumeClaim", ns, n)].(*v1.PersistentVolumeClaim)
		if !ok {
			continue
		}
		e.PersistentVolumeClaims = append(e.PersistentVolumeClaims, pvc)
		if pv, ok := k.objs[objKey("PersistentVolume", "", pvc.Spec.VolumeName)].(*v1.PersistentVolume); ok {
			e.PersistentVolumes = append(e.PersistentVolumes, pv)
			if pv.Spec.CSI != nil {
				drivers.add(pv.Spec.CSI.Driver)
			}
		}
	}
	for _, d := range drivers.sorted() {
		if o, ok := k.objs[objKey("CSIDriver", "", d)].(*storagev1.CSIDriver); ok {
			e.CSIDrivers = append(e.CSIDrivers, o)
		}
	}
	for id, v := range k.tokens[pod.UID] {
		e.Tokens = append(e.Tokens, Token{ServiceAccount: id.sa, Audience: id.audience, ExpirationSeconds: id.exp, Value: v})
	}
	sort.Slice(e.Tokens, func(i, j int) bool {
		a, b := e.Tokens[i], e.Tokens[j]
		if a.ServiceAccount != b.ServiceAccount {
			return a.ServiceAccount < b.ServiceAccount
		}
		if a.Audience != b.Audience {
			return a.Audience < b.Audience
		}
		return a.ExpirationSeconds < b.ExpirationSeconds
	})
	e.ServiceEnv = k.env[serviceEnvKey(ns, enableServiceLinks(pod))]
	return e
}

// Getter reads through the API, keeping a copy of what the API server
// answered, and serves that copy when the API server gives no answer. It
// implements the volumes' Getter, the runtime's Objects and service
// environment, and the CSI volumes' object reads.
type Getter struct {
	api      API
	client   apiclient.Interface
	services func(namespace string, enableServiceLinks bool) (map[string]string, error)
	kept     *kept
	served   func(kind string) // counts the objects served from the checkpoint
}

// offline logs that an object is served from the checkpoint.
func (g *Getter) offline(ctx context.Context, kind, namespace, name string, err error) {
	klog.FromContext(ctx).V(2).Info("API server unreachable; using the checkpoint's copy", "kind", kind, "object", klog.KRef(namespace, name), "err", err)
	if g.served != nil {
		g.served(kind)
	}
}

func (g *Getter) missing(kind, namespace, name string, err error) error {
	if kind == "Secret" && !g.kept.secrets {
		return fmt.Errorf("%w (the API server is unreachable and the offline checkpoint keeps no Secrets: --offline-secrets is off)", err)
	}
	return fmt.Errorf("%w (the API server is unreachable and the offline checkpoint has no %s %s)", err, kind, klog.KRef(namespace, name))
}

// ConfigMap implements the volumes' Getter.
func (g *Getter) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	o, err := g.api.ConfigMap(ctx, namespace, name)
	return readThrough(ctx, g, "ConfigMap", namespace, name, o, err)
}

// Secret implements the volumes' Getter.
func (g *Getter) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	o, err := g.api.Secret(ctx, namespace, name)
	return readThrough(ctx, g, "Secret", namespace, name, o, err)
}

// ClusterTrustBundle implements the volumes' Getter: read through the API
// getter only (the checkpoint keeps no ClusterTrustBundles; offline, the
// API getter's last copy, if any).
func (g *Getter) ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	return g.api.ClusterTrustBundle(ctx, name)
}

// ClusterTrustBundles implements the volumes' Getter, as ClusterTrustBundle.
func (g *Getter) ClusterTrustBundles(ctx context.Context, signerName string, selector labels.Selector) ([]certificatesv1.ClusterTrustBundle, error) {
	return g.api.ClusterTrustBundles(ctx, signerName, selector)
}

// readThrough keeps what the API server answered, or serves the kept copy
// when it gave no answer.
func readThrough[T any](ctx context.Context, g *Getter, kind, namespace, name string, o *T, err error) (*T, error) {
	switch {
	case err == nil:
		g.kept.put(kind, namespace, name, o)
		return o, nil
	case apierrors.IsNotFound(err):
		g.kept.drop(kind, namespace, name)
		return nil, err
	case !Unreachable(err):
		return nil, err
	}
	if k, ok := g.kept.get(kind, namespace, name); ok {
		if t, ok := k.(*T); ok {
			g.offline(ctx, kind, namespace, name, err)
			return t, nil
		}
	}
	return nil, g.missing(kind, namespace, name, err)
}

// Token implements the volumes' Getter: offline, the token last issued for
// the pod (expired or not: the API server that would check it is gone).
func (g *Getter) Token(ctx context.Context, pod *v1.Pod, sa, audience string, exp int64) (string, error) {
	key := tokenID{sa, audience, exp}
	t, err := g.api.Token(ctx, pod, sa, audience, exp)
	if err == nil {
		g.kept.putToken(pod.UID, key, t)
		return t, nil
	}
	if !Unreachable(err) {
		return "", err
	}
	if t, ok := g.kept.token(pod.UID, key); ok {
		g.offline(ctx, "ServiceAccountToken", pod.Namespace, sa, err)
		return t, nil
	}
	return "", fmt.Errorf("%w (the API server is unreachable and the offline checkpoint has no token of service account %s for the pod)", err, sa)
}

// Forget drops what is kept for a removed pod (its tokens).
func (g *Getter) Forget(uid types.UID) {
	g.api.Forget(uid)
	g.kept.forgetPod(uid)
}

// ServiceEnv is the service environment of a namespace: offline (the
// Services not read since start), the one last computed.
func (g *Getter) ServiceEnv(namespace string, links bool) (map[string]string, error) {
	key := serviceEnvKey(namespace, links)
	env, err := g.services(namespace, links)
	if err == nil {
		g.kept.putEnv(key, env)
		return env, nil
	}
	g.kept.mu.RLock()
	old, ok := g.kept.env[key]
	g.kept.mu.RUnlock()
	if ok {
		return old, nil
	}
	return nil, err
}

// PersistentVolumeClaim reads a claim for the CSI volumes.
func (g *Getter) PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	o, err := g.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	return readThrough(ctx, g, "PersistentVolumeClaim", namespace, name, nilIfErr(o, err), err)
}

// PersistentVolume reads a volume for the CSI volumes.
func (g *Getter) PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	o, err := g.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	return readThrough(ctx, g, "PersistentVolume", "", name, nilIfErr(o, err), err)
}

// CSIDriver reads a CSIDriver for the CSI volumes.
func (g *Getter) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	o, err := g.client.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
	return readThrough(ctx, g, "CSIDriver", "", name, nilIfErr(o, err), err)
}

func nilIfErr[T any](o *T, err error) *T {
	if err != nil {
		return nil
	}
	return o
}
