// Package clustertrustbundlepublisher is the
// kube-apiserver-serving-clustertrustbundle-publisher-controller: it keeps
// exactly one ClusterTrustBundle for a signer (upstream runs it for
// kubernetes.io/kube-apiserver-serving), holding the CA bundle that
// verifies the kube-apiserver's serving certificate. The bundle is named
// after the signer and a hash of its content, put back when deleted or
// edited, and every other bundle of the signer is deleted.
package clustertrustbundlepublisher

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1alpha1 "k8s.io/api/certificates/v1alpha1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	certv1informers "k8s.io/client-go/informers/certificates/v1"
	certv1alpha1informers "k8s.io/client-go/informers/certificates/v1alpha1"
	certv1beta1informers "k8s.io/client-go/informers/certificates/v1beta1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// KubeAPIServerServingSignerName is the signer upstream publishes the
	// kube-apiserver's serving CA for.
	KubeAPIServerServingSignerName = "kubernetes.io/kube-apiserver-serving"
	// KubeAPIServerServingCAName names the CA content (upstream's static
	// CA content provider name).
	KubeAPIServerServingCAName = "kube-apiserver-serving"

	queueName = "ca_cert_publisher_cluster_trust_bundles"
	// syncKey is the queue's only key: every event leads to one full sync.
	syncKey = ""
)

// PublisherRunner is a publisher for one API version.
type PublisherRunner interface {
	Run(ctx context.Context)
}

// publisher keeps the signer's bundle for one ClusterTrustBundle API
// version; T is that version's ClusterTrustBundle.
type publisher[T any] struct {
	signerName string
	ca         CAContentProvider
	api        bundleAPI[T]

	informer cache.SharedIndexInformer
	queue    workqueue.TypedRateLimitingInterface[string]
}

// bundleAPI is what differs between the API versions of ClusterTrustBundle.
type bundleAPI[T any] struct {
	newBundle   func(name, signerName, trustBundle string) *T
	name        func(*T) string
	trustBundle func(*T) string
	// withTrustBundle returns a copy of b holding trustBundle.
	withTrustBundle func(b *T, trustBundle string) *T
	client          bundleClient[T]
}

// bundleClient is the typed client of one version's ClusterTrustBundles.
type bundleClient[T any] interface {
	Create(context.Context, *T, metav1.CreateOptions) (*T, error)
	Update(context.Context, *T, metav1.UpdateOptions) (*T, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// signerSelector limits the informer to the signer's bundles.
func signerSelector(signerName string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", signerName).String()
	}
}

// NewGAClusterTrustBundlePublisher publishes through certificates.k8s.io/v1.
func NewGAClusterTrustBundlePublisher(signerName string, ca CAContentProvider, kubeClient clientset.Interface) (PublisherRunner, error) {
	client := kubeClient.CertificatesV1().ClusterTrustBundles()
	type ctb = certificatesv1.ClusterTrustBundle
	return newPublisher(signerName, ca,
		certv1informers.NewFilteredClusterTrustBundleInformer(kubeClient, 0, cache.Indexers{}, signerSelector(signerName)),
		bundleAPI[ctb]{
			newBundle: func(name, signerName, trustBundle string) *ctb {
				return &ctb{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: trustBundle},
				}
			},
			name:        func(b *ctb) string { return b.Name },
			trustBundle: func(b *ctb) string { return b.Spec.TrustBundle },
			withTrustBundle: func(b *ctb, trustBundle string) *ctb {
				b = b.DeepCopy()
				b.Spec.TrustBundle = trustBundle
				return b
			},
			client: client,
		})
}

// NewBetaClusterTrustBundlePublisher publishes through
// certificates.k8s.io/v1beta1.
func NewBetaClusterTrustBundlePublisher(signerName string, ca CAContentProvider, kubeClient clientset.Interface) (PublisherRunner, error) {
	client := kubeClient.CertificatesV1beta1().ClusterTrustBundles()
	type ctb = certificatesv1beta1.ClusterTrustBundle
	return newPublisher(signerName, ca,
		certv1beta1informers.NewFilteredClusterTrustBundleInformer(kubeClient, 0, cache.Indexers{}, signerSelector(signerName)),
		bundleAPI[ctb]{
			newBundle: func(name, signerName, trustBundle string) *ctb {
				return &ctb{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       certificatesv1beta1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: trustBundle},
				}
			},
			name:        func(b *ctb) string { return b.Name },
			trustBundle: func(b *ctb) string { return b.Spec.TrustBundle },
			withTrustBundle: func(b *ctb, trustBundle string) *ctb {
				b = b.DeepCopy()
				b.Spec.TrustBundle = trustBundle
				return b
			},
			client: client,
		})
}

// NewAlphaClusterTrustBundlePublisher publishes through
// certificates.k8s.io/v1alpha1.
func NewAlphaClusterTrustBundlePublisher(signerName string, ca CAContentProvider, kubeClient clientset.Interface) (PublisherRunner, error) {
	client := kubeClient.CertificatesV1alpha1().ClusterTrustBundles()
	type ctb = certificatesv1alpha1.ClusterTrustBundle
	return newPublisher(signerName, ca,
		certv1alpha1informers.NewFilteredClusterTrustBundleInformer(kubeClient, 0, cache.Indexers{}, signerSelector(signerName)),
		bundleAPI[ctb]{
			newBundle: func(name, signerName, trustBundle string) *ctb {
				return &ctb{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec:       certificatesv1alpha1.ClusterTrustBundleSpec{SignerName: signerName, TrustBundle: trustBundle},
				}
			},
			name:        func(b *ctb) string { return b.Name },
			trustBundle: func(b *ctb) string { return b.Spec.TrustBundle },
			withTrustBundle: func(b *ctb, trustBundle string) *ctb {
				b = b.DeepCopy()
				b.Spec.TrustBundle = trustBundle
				return b
			},
			client: client,
		})
}

// versionOrder is the order upstream tries the API versions in.
var versionOrder = []struct {
	gv  schema.GroupVersion
	new func(string, CAContentProvider, clientset.Interface) (PublisherRunner, error)
}{
	{certificatesv1.SchemeGroupVersion, NewGAClusterTrustBundlePublisher},
	{certificatesv1beta1.SchemeGroupVersion, NewBetaClusterTrustBundlePublisher},
	{certificatesv1alpha1.SchemeGroupVersion, NewAlphaClusterTrustBundlePublisher},
}

// NewForServedVersion returns a publisher for the first of v1, v1beta1
// and v1alpha1 whose clustertrustbundles the apiserver serves, as upstream
// chooses; nil (and no error) when none is served.
func NewForServedVersion(signerName string, ca CAContentProvider, kubeClient clientset.Interface) (PublisherRunner, error) {
	for _, v := range versionOrder {
		served, err := ClusterTrustBundlesAvailable(kubeClient, v.gv)
		if err != nil {
			return nil, fmt.Errorf("discovery failed for ClusterTrustBundle: %w", err)
		}
		if !served {
			continue
		}
		p, err := v.new(signerName, ca, kubeClient)
		if err != nil {
			return nil, fmt.Errorf("error creating kube-apiserver-serving signer certificates publisher: %w", err)
		}
		return p, nil
	}
	return nil, nil
}

// ClusterTrustBundlesAvailable reports whether gv serves clustertrustbundles.
func ClusterTrustBundlesAvailable(kubeClient clientset.Interface, gv schema.GroupVersion) (bool, error) {
	list, err := kubeClient.Discovery().ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	// A partial list may come with an error; trust what it lists.
	if list != nil {
		for _, r := range list.APIResources {
			if r.Name == "clustertrustbundles" {
				return true, nil
			}
		}
	}
	return false, err
}

func newPublisher[T any](signerName string, ca CAContentProvider, informer cache.SharedIndexInformer, api bundleAPI[T]) (PublisherRunner, error) {
	if signerName == "" {
		return nil, fmt.Errorf("signerName cannot be empty")
	}
	registerMetrics()
	p := &publisher[T]{
		signerName: signerName,
		ca:         ca,
		api:        api,
		informer:   informer,
		queue:      controller.NewNamedQueue(queueName),
	}
	// Any change to the signer's bundles (or to the CA) means one full sync.
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(interface{}) { p.queue.Add(syncKey) },
		UpdateFunc: func(_, _ interface{}) { p.queue.Add(syncKey) },
		DeleteFunc: func(interface{}) { p.queue.Add(syncKey) },
	}); err != nil {
		return nil, fmt.Errorf("failed to register ClusterTrustBundle event handler: %w", err)
	}
	ca.AddListener(listenerFunc(func() { p.queue.Add(syncKey) }))
	return p, nil
}

// Run runs the publisher's own informer and its one worker until ctx is
// done.
func (p *publisher[T]) Run(ctx context.Context) {
	defer utilruntime.HandleCrashWithContext(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { p.informer.RunWithContext(ctx) })

	// The first sync publishes even if no bundle exists to trigger one; the
	// worker starts only once the informer has synced.
	p.queue.Add(syncKey)
	loop := controller.WorkLoop[string]{Name: queueName, Queue: p.queue, Sync: p.syncItem}
	loop.Run(ctx, 1, p.informer.HasSynced)
}

// syncItem syncs for the one key the queue ever holds.
func (p *publisher[T]) syncItem(ctx context.Context, _ string) error { return p.sync(ctx) }

// sync makes the bundle for the current CA exist with that content, then
// deletes every other bundle of the signer.
func (p *publisher[T]) sync(ctx context.Context) (err error) {
	start := time.Now()
	defer func() {
		recordMetrics(start, err)
		klog.FromContext(ctx).V(4).Info("Finished syncing ClusterTrustBundle", "signerName", p.signerName, "elapsedTime", time.Since(start))
	}()

	caBundle := string(p.ca.CurrentCABundleContent())
	wantName := bundleName(p.signerName, []byte(caBundle))

	obj, exists, err := p.informer.GetIndexer().GetByKey(wantName)
	switch {
	case err != nil:
		return err
	case !exists:
		_, err = p.api.client.Create(ctx, p.api.newBundle(wantName, p.signerName, caBundle), metav1.CreateOptions{})
	default:
		current := obj.(*T)
		if p.api.trustBundle(current) != caBundle {
			_, err = p.api.client.Update(ctx, p.api.withTrustBundle(current, caBundle), metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return err
	}

	// A failed deletion does not stop the others; it makes the sync retry.
	var deleteErr error
	for _, o := range p.informer.GetIndexer().List() {
		name := p.api.name(o.(*T))
		if name == wantName {
			continue
		}
		if err := p.api.client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "failed to remove a cluster trust bundle", "bundleName", name)
			deleteErr = err
		}
	}
	return deleteErr
}

// bundleName is "<signer name with / as :>:<hex of the first 12 bytes of
// the bundle's SHA-256>": a new CA gets a new bundle name.
func bundleName(signerName string, bundle []byte) string {
	sum := sha256.Sum256(bundle)
	return fmt.Sprintf("%s:%x", strings.ReplaceAll(signerName, "/", ":"), sum[:12])
}
