package serviceenv

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/internal/ctortest"
)

func TestFromService(t *testing.T) {
	cases := []struct {
		name string
		svc  *v1.Service
		want map[string]string
	}{
		{"no ports", &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: v1.ServiceSpec{ClusterIP: "10.0.0.2"}},
			map[string]string{"X_SERVICE_HOST": "10.0.0.2"}},
		{"named and udp ports", &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "my-db"}, Spec: v1.ServiceSpec{ClusterIP: "10.0.0.3",
			Ports: []v1.ServicePort{{Name: "sql", Port: 5432, Protocol: v1.ProtocolTCP}, {Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP}}}},
			map[string]string{
				"MY_DB_SERVICE_HOST": "10.0.0.3", "MY_DB_SERVICE_PORT": "5432",
				"MY_DB_SERVICE_PORT_SQL": "5432", "MY_DB_SERVICE_PORT_DNS_UDP": "53",
				"MY_DB_PORT":                "tcp://10.0.0.3:5432",
				"MY_DB_PORT_5432_TCP":       "tcp://10.0.0.3:5432",
				"MY_DB_PORT_5432_TCP_PROTO": "tcp", "MY_DB_PORT_5432_TCP_PORT": "5432", "MY_DB_PORT_5432_TCP_ADDR": "10.0.0.3",
				"MY_DB_PORT_53_UDP":       "udp://10.0.0.3:53",
				"MY_DB_PORT_53_UDP_PROTO": "udp", "MY_DB_PORT_53_UDP_PORT": "53", "MY_DB_PORT_53_UDP_ADDR": "10.0.0.3",
			}},
		{"ipv6", &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "v6"}, Spec: v1.ServiceSpec{ClusterIP: "fd00::1", Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}},
			map[string]string{"V6_SERVICE_HOST": "fd00::1", "V6_SERVICE_PORT": "80", "V6_PORT": "tcp://[fd00::1]:80",
				"V6_PORT_80_TCP": "tcp://[fd00::1]:80", "V6_PORT_80_TCP_PROTO": "tcp", "V6_PORT_80_TCP_PORT": "80", "V6_PORT_80_TCP_ADDR": "fd00::1"}},
	}
	for _, tc := range cases {
		got := map[string]string{}
		FromService(tc.svc, got)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.name, got, tc.want)
		}
	}
}

func TestEnvSelectsServices(t *testing.T) {
	svc := func(ns, name, ip string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}}}
	}
	client := fake.NewSimpleClientset(
		svc("default", "kubernetes", "10.96.0.1"),
		svc("shop", "web", "10.96.0.20"),
		svc("shop", "headless", v1.ClusterIPNone),
		svc("other", "db", "10.96.0.30"),
		svc("shop", "kubernetes", "10.96.0.99"), // a namespace's own "kubernetes" wins there
	)
	s, err := New(Config{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go s.Run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), s.synced) {
		t.Fatal("the services were not listed within 10 s")
	}
	cases := []struct {
		ns      string
		links   bool
		present map[string]string
		absent  []string
	}{
		{"shop", true, map[string]string{"WEB_SERVICE_HOST": "10.96.0.20", "KUBERNETES_SERVICE_HOST": "10.96.0.99"}, []string{"HEADLESS_SERVICE_HOST", "DB_SERVICE_HOST"}},
		{"shop", false, map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1"}, []string{"WEB_SERVICE_HOST"}},
		{"other", true, map[string]string{"DB_SERVICE_HOST": "10.96.0.30", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}, []string{"WEB_SERVICE_HOST"}},
	}
	for _, tc := range cases {
		env, err := s.Env(tc.ns, tc.links)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.present {
			if env[k] != v {
				t.Errorf("%s links=%v: %s = %q, want %q", tc.ns, tc.links, k, env[k], v)
			}
		}
		for _, k := range tc.absent {
			if _, ok := env[k]; ok {
				t.Errorf("%s links=%v: %s set", tc.ns, tc.links, k)
			}
		}
	}
}

func TestNew(t *testing.T) {
	ctortest.Run(t, New, []ctortest.Case[Config]{
		{Name: "no client", Config: Config{}, WantErr: "Config.Client is required"},
		{Name: "complete", Config: Config{Client: fake.NewSimpleClientset()}},
	}, nil)
}
