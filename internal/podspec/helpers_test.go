package podspec

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }

func metaName(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: n} }
