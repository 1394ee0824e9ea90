package serviceenv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nodelet/nodelet/internal/apiclient"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Services keeps every Service of the cluster in an informer cache.
type Services struct {
	informer cache.SharedIndexInformer
	lister   corelisters.ServiceLister
	synced   cache.InformerSynced
}

// Config configures a Services.
type Config struct {
	// Client watches the Services.
	Client apiclient.Interface
}

// New returns a Services for cfg; Run starts it. It fails when cfg has no
// Client.
func New(cfg Config) (*Services, error) {
	if cfg.Client == nil {
		return nil, errors.New("services: Config.Client is required")
	}
	services := cfg.Client.CoreV1().Services("")
	inf := cache.NewSharedIndexInformer(apiclient.ListWatch(cfg.Client, services.List, services.Watch, nil), &v1.Service{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return &Services{informer: inf, lister: corelisters.NewServiceLister(inf.GetIndexer()), synced: inf.HasSynced}, nil
}

// Run starts the informer until ctx is done.
func (s *Services) Run(ctx context.Context) error {
	s.informer.Run(ctx.Done())
	return nil
}

// Env returns the service variables for a pod in namespace: the
// "kubernetes" service of the default namespace always, and every service
// of the namespace with a cluster IP when enableServiceLinks. It fails
// until the services have been listed once, as upstream.
func (s *Services) Env(namespace string, enableServiceLinks bool) (map[string]string, error) {
	if !s.synced() {
		return nil, fmt.Errorf("services have not yet been read at least once, cannot construct envvars")
	}
	all, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	byName := map[string]*v1.Service{}
	for _, svc := range all {
		if !hasClusterIP(svc) {
			continue
		}
		switch {
		case svc.Namespace == metav1.NamespaceDefault && svc.Name == "kubernetes":
			if _, ok := byName[svc.Name]; !ok {
				byName[svc.Name] = svc
			}
		case svc.Namespace == namespace && enableServiceLinks:
			byName[svc.Name] = svc
		}
	}
	env := map[string]string{}
	for _, svc := range byName {
		FromService(svc, env)
	}
	return env, nil
}

func hasClusterIP(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone
}

// FromService adds the variables of one service to env, as upstream's
// envvars.FromServices.
func FromService(s *v1.Service, env map[string]string) {
	name := makeName(s.Name)
	env[name+"_SERVICE_HOST"] = s.Spec.ClusterIP
	if len(s.Spec.Ports) == 0 {
		return
	}
	env[name+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			env[name+"_SERVICE_PORT_"+makeName(p.Name)] = strconv.Itoa(int(p.Port))
		}
	}
	// Docker-compatible link variables.
	first := s.Spec.Ports[0]
	env[name+"_PORT"] = linkURL(first, s.Spec.ClusterIP)
	for _, p := range s.Spec.Ports {
		proto := strings.ToUpper(string(p.Protocol))
		if proto == "" {
			proto = "TCP"
		}
		prefix := fmt.Sprintf("%s_PORT_%d_%s", name, p.Port, proto)
		env[prefix] = linkURL(p, s.Spec.ClusterIP)
		env[prefix+"_PROTO"] = strings.ToLower(proto)
		env[prefix+"_PORT"] = strconv.Itoa(int(p.Port))
		env[prefix+"_ADDR"] = s.Spec.ClusterIP
	}
}

func linkURL(p v1.ServicePort, ip string) string {
	proto := strings.ToLower(string(p.Protocol))
	if proto == "" {
		proto = "tcp"
	}
	host := ip
	if strings.Contains(ip, ":") {
		host = "[" + ip + "]"
	}
	return fmt.Sprintf("%s://%s:%d", proto, host, p.Port)
}

func makeName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}
