package garbagecollector

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDebuggingHandlerServesDOT(t *testing.T) {
	g := newTestGC(t)
	g.observe(addEvent, cm("ns", "owner", "owner-uid"), nil)
	g.observe(addEvent, cm("ns", "dep", "dep-uid", ref("ConfigMap", "owner", "owner-uid")), nil)
	g.observe(addEvent, cm("ns", "lonely", "lonely-uid"), nil)
	g.observe(addEvent, cm("other", "x", "x-uid", ref("ConfigMap", "y", "y-uid")), nil)

	get := func(url string) (int, string) {
		rec := httptest.NewRecorder()
		g.DebuggingHandler().ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("/graph")
	if code != 200 || !strings.HasPrefix(body, "strict digraph full {\n") {
		t.Fatalf("code %d body %q", code, body)
	}
	for _, want := range []string{`"dep-uid" -> "owner-uid";`, `"x-uid" -> "y-uid";`, `virtual="true"`, `label="uid=dep-uid\nnamespace=ns\nConfigMap.v1/dep\n"`} {
		if !strings.Contains(body, want) {
			t.Errorf("graph lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, "lonely-uid") {
		t.Error("objects without owners or dependents are left out")
	}

	_, body = get("/graph?uid=dep-uid")
	if !strings.Contains(body, `"dep-uid" -> "owner-uid";`) || strings.Contains(body, "x-uid") {
		t.Errorf("subgraph:\n%s", body)
	}
	if code, _ := get("/other"); code != 404 {
		t.Errorf("/other code = %d", code)
	}
}
