package typecheck

import (
	"os"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
)

// docGV is one group version document served from memory; fetches counts
// how often its bytes were asked for.
type docGV struct {
	data    []byte
	url     string
	fetches *atomic.Int32
}

func (d docGV) Schema(string) ([]byte, error) {
	if d.fetches != nil {
		d.fetches.Add(1)
	}
	return d.data, nil
}

func (d docGV) ServerRelativeURL() string { return d.url }

// docClient is an openapi.Client over a fixed index.
type docClient map[string]openapi.GroupVersion

func (c docClient) Paths() (map[string]openapi.GroupVersion, error) {
	out := make(map[string]openapi.GroupVersion, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out, nil
}

// testOpenAPI serves client-go's embedded OpenAPI v3 documents (core/v1,
// apps/v1, batch/v1, ...) and testdata/widgets.json as apis/example.com/v1,
// the way a server with a few custom resources would.
func testOpenAPI(t testing.TB) docClient {
	t.Helper()
	embedded, err := openapitest.NewEmbeddedFileClient().Paths()
	if err != nil {
		t.Fatal(err)
	}
	widgets, err := os.ReadFile("testdata/widgets.json")
	if err != nil {
		t.Fatal(err)
	}
	c := docClient{}
	for k, v := range embedded {
		c[k] = v
	}
	c["apis/example.com/v1"] = docGV{data: widgets, url: "/openapi/v3/apis/example.com/v1?hash=1"}
	return c
}

// testMapper knows the kinds of testOpenAPI and a few without schemas.
func testMapper() *meta.DefaultRESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	for _, k := range []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "apps", Version: "v1", Kind: "StatefulSet"},
		{Group: "apps", Version: "v1", Kind: "DaemonSet"},
		{Group: "apps", Version: "v1", Kind: "ReplicaSet"},
		{Version: "v1", Kind: "Pod"},
		{Version: "v1", Kind: "ConfigMap"},
		{Version: "v1", Kind: "Secret"},
		{Version: "v1", Kind: "Service"},
		{Group: "batch", Version: "v1", Kind: "Job"},
		{Group: "batch", Version: "v1", Kind: "CronJob"},
		{Group: "example.com", Version: "v1", Kind: "Widget"},
		{Group: "example.com", Version: "v1", Kind: "Gadget"},
		{Group: "example.com", Version: "v1", Kind: "Untyped"},
		{Group: "example.com", Version: "v1", Kind: "Schemaless"},
	} {
		m.Add(k, meta.RESTScopeNamespace)
	}
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	return m
}
