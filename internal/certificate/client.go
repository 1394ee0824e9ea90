package certificate

import (
	"k8s.io/client-go/kubernetes"
	certificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	certificatesv1beta1 "k8s.io/client-go/kubernetes/typed/certificates/v1beta1"
	"k8s.io/client-go/rest"
)

// certClient is a kubernetes.Interface with the certificates groups only
// (what util/certificate and its csr package call): building the full
// clientset would link every API group's client into nodelet, which every
// node pays for in memory. Any other group's method panics.
type certClient struct {
	kubernetes.Interface
	v1      certificatesv1.CertificatesV1Interface
	v1beta1 certificatesv1beta1.CertificatesV1beta1Interface
}

// NewCertificatesClient builds a client of the certificates groups for rc.
func NewCertificatesClient(rc *rest.Config) (kubernetes.Interface, error) {
	c := &certClient{}
	var err error
	if c.v1, err = certificatesv1.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.v1beta1, err = certificatesv1beta1.NewForConfig(rc); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certClient) CertificatesV1() certificatesv1.CertificatesV1Interface { return c.v1 }
func (c *certClient) CertificatesV1beta1() certificatesv1beta1.CertificatesV1beta1Interface {
	return c.v1beta1
}
