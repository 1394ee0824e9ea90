package images

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/internal/credentialprovider"
	"github.com/nodelet/nodelet/internal/images/pullmanager"
)

// SecretGetter reads the Secrets named in a pod's imagePullSecrets (in
// cluster mode, volumes.APIGetter: a cached GET).
type SecretGetter interface {
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// Credential is one registry credential that matched an image, with the
// Secret or credential provider it came from.
type Credential struct {
	Auth *runtimeapi.AuthConfig
	// Secret is namespace/name of the pull secret.
	Secret string
	// Provider is the credential provider plugin's name.
	Provider string

	// What image pull records keep (KubeletEnsureSecretPulledImages): the
	// pull secret with the hash of this credential, or the service account
	// a provider gave it for; neither: a credential of the node, which
	// every pod has.
	secret         *kubeletconfigv1beta1.ImagePullSecret
	serviceAccount *kubeletconfigv1beta1.ImagePullServiceAccount
}

// ReasonCredentialProviderFailed is the Warning event of a credential
// provider plugin that failed for an image (the pull goes on with the
// other credentials).
const ReasonCredentialProviderFailed = "FailedCredentialProvider"

// providerCredentials are the credentials the credential provider plugins
// give for image, matched against it as upstream's keyring does; they come
// after the pod's pull secrets' (upstream's UnionDockerKeyring). errs are
// the plugins that failed.
func (p *Puller) providerCredentials(ctx context.Context, pod *v1.Pod, image string) (creds []Credential, errs []error) {
	if p.providers == nil {
		return nil, nil
	}
	repo := repository(image)
	results, errs := p.providers.Lookup(ctx, repo, credentialprovider.Pod{
		Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ServiceAccountName: pod.Spec.ServiceAccountName})
	kr := &keyring{creds: map[string][]Credential{}}
	for _, r := range results {
		cfg := make(map[string]dockerConfigEntry, len(r.Auths))
		for k, a := range r.Auths {
			cfg[k] = dockerConfigEntry{Username: a.Username, Password: a.Password}
		}
		src := credentialSource{provider: r.Provider}
		if sa := r.ServiceAccount; sa != nil {
			src.serviceAccount = &kubeletconfigv1beta1.ImagePullServiceAccount{UID: string(sa.UID), Namespace: sa.Namespace, Name: sa.Name}
		}
		if err := kr.addFrom(src, cfg); err != nil {
			errs = append(errs, &credentialprovider.ProviderError{Provider: r.Provider, Image: repo, Err: err})
		}
	}
	kr.sortIndex()
	return kr.lookup(repo), errs
}

// credentialSource says where a keyring entry came from: a pull secret, or
// a provider (for a service account or for the node).
type credentialSource struct {
	secret         *v1.Secret
	provider       string
	serviceAccount *kubeletconfigv1beta1.ImagePullServiceAccount
}

// podCredentials are the credentials of a pod's imagePullSecrets that match
// image, most specific registry path first, as upstream's keyring orders
// them; missing names the secrets that could not be read.
func (p *Puller) podCredentials(ctx context.Context, pod *v1.Pod, image string) (creds []Credential, missing []string, err error) {
	if len(pod.Spec.ImagePullSecrets) == 0 {
		return nil, nil, nil
	}
	var secrets []*v1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		if p.secrets == nil {
			missing = append(missing, ref.Name)
			continue
		}
		s, err := p.secrets.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil || s == nil {
			missing = append(missing, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	kr, err := keyringFromSecrets(secrets)
	if err != nil {
		return nil, missing, err
	}
	return kr.lookup(repository(image)), missing, nil
}

// keyring is upstream's BasicDockerKeyring (pkg/credentialprovider): the
// entries of docker config files keyed by registry host and optional path,
// the index reverse-sorted so that more specific paths match first.
type keyring struct {
	index []string
	creds map[string][]Credential
}

// dockerConfigEntry is one "auths" entry: user and password, or "auth"
// holding base64(user:password).
type dockerConfigEntry struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Email    string `json:"email,omitempty"`
	Auth     string `json:"auth,omitempty"`
}

// keyringFromSecrets reads kubernetes.io/dockerconfigjson and
// kubernetes.io/dockercfg secrets (others are ignored, as upstream). A
// secret of those types that does not decode is an error, as upstream.
func keyringFromSecrets(secrets []*v1.Secret) (*keyring, error) {
	kr := &keyring{creds: map[string][]Credential{}}
	for _, s := range secrets {
		var cfg map[string]dockerConfigEntry
		switch {
		case s.Type == v1.SecretTypeDockerConfigJson && len(s.Data[v1.DockerConfigJsonKey]) > 0:
			var doc struct {
				Auths map[string]dockerConfigEntry `json:"auths"`
			}
			if err := json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &doc); err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: %w", s.Namespace, s.Name, err)
			}
			cfg = doc.Auths
		case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
			if err := json.Unmarshal(s.Data[v1.DockerConfigKey], &cfg); err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: %w", s.Namespace, s.Name, err)
			}
		default:
			continue
		}
		if err := kr.addFrom(credentialSource{secret: s}, cfg); err != nil {
			return nil, fmt.Errorf("image pull secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	kr.sortIndex()
	return kr, nil
}

func (kr *keyring) addFrom(source credentialSource, cfg map[string]dockerConfigEntry) error {
	// Sorted, so that credentials of one key keep a stable order.
	regs := make([]string, 0, len(cfg))
	for r := range cfg {
		regs = append(regs, r)
	}
	sort.Strings(regs)
	for _, reg := range regs {
		e := cfg[reg]
		user, password := e.Username, e.Password
		if e.Auth != "" {
			var err error
			if user, password, err = decodeAuth(e.Auth); err != nil {
				return err
			}
		}
		if !strings.HasPrefix(reg, "https://") && !strings.HasPrefix(reg, "http://") {
			reg = "https://" + reg
		}
		u, err := url.Parse(reg)
		if err != nil {
			continue // upstream logs and ignores the entry
		}
		// Like the docker client: host, or host and path; /v1/ and /v2/
		// mean the host.
		path := u.Path
		if strings.HasPrefix(path, "/v2/") || strings.HasPrefix(path, "/v1/") {
			path = path[3:]
		}
		key := u.Host
		if path != "" && path != "/" {
			key = u.Host + path
		}
		if _, ok := kr.creds[key]; !ok {
			kr.index = append(kr.index, key)
		}
		c := Credential{
			Auth:     &runtimeapi.AuthConfig{Username: user, Password: password},
			Provider: source.provider, serviceAccount: source.serviceAccount,
		}
		if s := source.secret; s != nil {
			c.Secret = s.Namespace + "/" + s.Name
			c.secret = &kubeletconfigv1beta1.ImagePullSecret{UID: string(s.UID), Namespace: s.Namespace, Name: s.Name,
				CredentialHash: pullmanager.CredentialHash(user, password, e.Email)}
		}
		kr.creds[key] = append(kr.creds[key], c)
	}
	return nil
}

func (kr *keyring) sortIndex() { sort.Sort(sort.Reverse(sort.StringSlice(kr.index))) }

// decodeAuth decodes base64(user:password), padded or not.
func decodeAuth(field string) (string, string, error) {
	var b []byte
	var err error
	if strings.HasSuffix(strings.TrimSpace(field), "=") {
		b, err = base64.StdEncoding.DecodeString(field)
	} else {
		b, err = base64.RawStdEncoding.DecodeString(field)
	}
	if err != nil {
		return "", "", err
	}
	user, password, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", errors.New("unable to parse auth field, must be formatted as base64(username:password)")
	}
	return user, password, nil
}

const defaultRegistryHost = "index.docker.io"

// lookup returns the credentials whose key matches repo (a normalized
// repository name such as docker.io/library/busybox): every key whose host
// matches (with * globs per dot-separated part), whose port is the same and
// whose path is a prefix of the repository's, most specific first. For
// Docker Hub images, credentials for index.docker.io are the fallback.
func (kr *keyring) lookup(repo string) []Credential {
	var out []Credential
	for _, k := range kr.index {
		if urlsMatch(k, repo) {
			out = append(out, kr.creds[k]...)
		}
	}
	if len(out) > 0 {
		return out
	}
	if isDefaultRegistry(repo) {
		return kr.creds[defaultRegistryHost]
	}
	return nil
}

func urlsMatch(glob, target string) bool {
	g, err := url.Parse("https://" + glob)
	if err != nil {
		return false
	}
	t, err := url.Parse("https://" + target)
	if err != nil {
		return false
	}
	gParts, gPort := splitHost(g.Host)
	tParts, tPort := splitHost(t.Host)
	if gPort != tPort || len(gParts) != len(tParts) || !strings.HasPrefix(t.Path, g.Path) {
		return false
	}
	for i := range gParts {
		if ok, err := filepath.Match(gParts[i], tParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// isDefaultRegistry reports whether repo is pulled from Docker Hub.
func isDefaultRegistry(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	if first == "" {
		return false
	}
	if !found || first == "docker.io" || first == "index.docker.io" {
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// repository is the normalized repository of an image reference, as
// upstream's parsers.ParseImageName gives it to the keyring: the registry
// host (docker.io when there is none), "library/" for official Docker Hub
// images, no tag or digest.
func repository(image string) string {
	name := image
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	domain, rest, found := strings.Cut(name, "/")
	if !found || (!strings.ContainsAny(domain, ".:") && domain != "localhost" && strings.ToLower(domain) == domain) {
		domain, rest = "docker.io", name
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return domain + "/" + rest
}

// credentialsKey identifies a set of credentials, so that pulls of one image
// with the same credentials are shared, and only those.
func credentialsKey(creds []Credential) string {
	if len(creds) == 0 {
		return ""
	}
	h := sha256.New()
	for _, c := range creds {
		fmt.Fprintf(h, "%q:%q:%q:%q\n", c.Auth.Username, c.Auth.Password, c.Auth.IdentityToken, c.Auth.RegistryToken)
	}
	return hex.EncodeToString(h.Sum(nil))
}
