package nodelifecycle

import (
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type coordLease = coordv1.Lease

func newLease(node string, renew time.Time) *coordv1.Lease {
	return &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: v1.NamespaceNodeLease, Name: node},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &node, RenewTime: &metav1.MicroTime{Time: renew}},
	}
}
