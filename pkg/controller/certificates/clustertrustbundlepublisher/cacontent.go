package clustertrustbundlepublisher

import (
	"fmt"

	"k8s.io/client-go/util/cert"
)

// Listener is told when the CA content changes.
type Listener interface {
	Enqueue()
}

// listenerFunc adapts a function to Listener.
type listenerFunc func()

func (f listenerFunc) Enqueue() { f() }

// CAContentProvider supplies the PEM CA bundle to publish. A provider
// whose content can change calls its listeners' Enqueue when it does, and
// the publisher then replaces the bundle.
type CAContentProvider interface {
	CurrentCABundleContent() []byte
	AddListener(Listener)
}

// staticCAContent never changes, so listeners are never called.
type staticCAContent struct {
	name     string
	caBundle []byte
}

// NewStaticCAContent is a provider of a fixed bundle, which must hold at
// least one PEM certificate. Upstream publishes the kube-apiserver's CA
// (--root-ca-file, else the CA of the controller manager's kubeconfig)
// read once at start, named KubeAPIServerServingCAName.
func NewStaticCAContent(name string, caBundle []byte) (CAContentProvider, error) {
	if len(caBundle) == 0 {
		return nil, fmt.Errorf("missing content for CA bundle %q", name)
	}
	if _, err := cert.NewPoolFromBytes(caBundle); err != nil {
		return nil, fmt.Errorf("error loading CA bundle for %q: %v", name, err)
	}
	return &staticCAContent{name: name, caBundle: caBundle}, nil
}

// Name identifies the content.
func (c *staticCAContent) Name() string { return c.name }

func (c *staticCAContent) CurrentCABundleContent() []byte { return c.caBundle }

func (c *staticCAContent) AddListener(Listener) {}
