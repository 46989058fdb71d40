// Package bootstrapcontrollers tests small cluster-bootstrap controllers
// against a real apiserver: clusterrole-aggregation fills aggregated
// ClusterRoles (through server-side apply), ttl annotates Nodes, and the
// CSR approver approves kubelet client CSRs after a SubjectAccessReview.
package bootstrapcontrollers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	capi "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/certificates/approver"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/clusterroleaggregation"
	"github.com/kcmclone/kube-controller-manager/pkg/controller/ttl"
	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

func TestMain(m *testing.M) { framework.Main(m) }

const waitTimeout = 30 * time.Second

// runControllers runs the three controllers in-process, with the worker
// counts the controller manager uses, until the test ends.
func runControllers(t *testing.T, c clientset.Interface) {
	t.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	factory := informers.NewSharedInformerFactory(c, 0)
	crac := clusterroleaggregation.NewController(factory.Rbac().V1().ClusterRoles(), c.RbacV1())
	ttlc := ttl.NewController(ctx, factory.Core().V1().Nodes(), c)
	ac := approver.NewController(ctx, c, factory.Certificates().V1().CertificateSigningRequests())
	factory.Start(ctx.Done())
	runs := []func(){
		func() { crac.Run(ctx, 5) },
		func() { ttlc.Run(ctx, 5) },
		func() { ac.Run(ctx, 5) },
	}
	done := make(chan struct{}, len(runs))
	for _, run := range runs {
		go func() { run(); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		cancel()
		for range runs {
			<-done
		}
		factory.Shutdown()
	})
}

func TestBootstrapControllers(t *testing.T) {
	c := framework.Shared(t).Client(t)
	runControllers(t, c)
	ctx := context.Background()

	t.Run("clusterrole aggregation", func(t *testing.T) {
		suffix := rand.String(6)
		label := map[string]string{"aggregate-to-test-" + suffix: "true"}
		aggName := "aggregated-" + suffix
		_, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: aggName},
			AggregationRule: &rbacv1.AggregationRule{
				ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: label}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.RbacV1().ClusterRoles().Delete(ctx, aggName, metav1.DeleteOptions{}) })

		rules := []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}},
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
		}
		for i, name := range []string{"part-a-" + suffix, "part-b-" + suffix} {
			_, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: label},
				// part-b repeats part-a's rule: the union has it once.
				Rules: rules[:i+1],
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}) })
		}

		var got *rbacv1.ClusterRole
		framework.Eventually(t, waitTimeout, "aggregated rules", func(ctx context.Context) (bool, error) {
			got, err = c.RbacV1().ClusterRoles().Get(ctx, aggName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return equality.Semantic.DeepEqual(got.Rules, rules), nil
		})
		owned := false
		for _, mf := range got.ManagedFields {
			if mf.Manager == "clusterrole-aggregation-controller" && mf.Operation == metav1.ManagedFieldsOperationApply {
				owned = true
			}
		}
		if !owned {
			t.Errorf("rules not applied by clusterrole-aggregation-controller: %+v", got.ManagedFields)
		}

		// Removing the label takes part-b's extra rule out again.
		partB, err := c.RbacV1().ClusterRoles().Get(ctx, "part-b-"+suffix, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		partB.Labels = nil
		if _, err := c.RbacV1().ClusterRoles().Update(ctx, partB, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, waitTimeout, "rules shrink", func(ctx context.Context) (bool, error) {
			got, err := c.RbacV1().ClusterRoles().Get(ctx, aggName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return equality.Semantic.DeepEqual(got.Rules, rules[:1]), nil
		})
	})

	t.Run("ttl annotation", func(t *testing.T) {
		name := "ttl-node-" + rand.String(6)
		_, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1.ObjectTTLAnnotationKey: "300"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}) })
		framework.Eventually(t, waitTimeout, "ttl annotation 0", func(ctx context.Context) (bool, error) {
			n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return n.Annotations[v1.ObjectTTLAnnotationKey] == "0", nil
		})
	})

	t.Run("csr approval", func(t *testing.T) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificateRequest(cryptorand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:it-node", Organization: []string{"system:nodes"}},
		}, key)
		if err != nil {
			t.Fatal(err)
		}
		name := "it-csr-" + rand.String(6)
		_, err = c.CertificatesV1().CertificateSigningRequests().Create(ctx, &capi.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: capi.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: capi.KubeAPIServerClientKubeletSignerName,
				Usages:     []capi.KeyUsage{capi.UsageDigitalSignature, capi.UsageClientAuth},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.CertificatesV1().CertificateSigningRequests().Delete(ctx, name, metav1.DeleteOptions{}) })
		// The admin requester may create certificatesigningrequests/nodeclient;
		// it is not the node itself, so the nodeclient message is used.
		framework.Eventually(t, waitTimeout, "CSR approved", func(ctx context.Context) (bool, error) {
			csr, err := c.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range csr.Status.Conditions {
				if cond.Type == capi.CertificateApproved {
					if cond.Reason != "AutoApproved" || cond.Message != "Auto approving kubelet client certificate after SubjectAccessReview." || cond.Status != v1.ConditionTrue {
						t.Errorf("unexpected condition %+v", cond)
					}
					return true, nil
				}
			}
			return false, nil
		})
	})
}
