package garbagecollector

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// dotVertex is one graph node in the DOT dump (upstream's attribute set, so
// tooling written against upstream's /graph keeps working).
type dotVertex struct {
	uid                types.UID
	gvk                schema.GroupVersionKind
	namespace, name    string
	missingFromGraph   bool
	beingDeleted       bool
	deletingDependents bool
	virtual            bool
}

func vertexFor(n *node) *dotVertex {
	gv, _ := schema.ParseGroupVersion(n.identity.APIVersion)
	return &dotVertex{
		uid:                n.identity.UID,
		gvk:                gv.WithKind(n.identity.Kind),
		namespace:          n.identity.Namespace,
		name:               n.identity.Name,
		beingDeleted:       n.isBeingDeleted(),
		deletingDependents: n.isDeletingDependents(),
		virtual:            !n.isObserved(),
	}
}

// missingVertex stands for an owner a dependent names but the graph lacks.
func missingVertex(ref metav1.OwnerReference) *dotVertex {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return &dotVertex{uid: ref.UID, gvk: gv.WithKind(ref.Kind), name: ref.Name, missingFromGraph: true}
}

func (v *dotVertex) writeDOT(w *bytes.Buffer) {
	kind := v.gvk.Kind + "." + v.gvk.Version
	if v.gvk.Group != "" {
		kind += "." + v.gvk.Group
	}
	label := fmt.Sprintf("uid=%v\nnamespace=%v\n%v/%v\n", v.uid, v.namespace, kind, v.name)
	var conds []string
	for _, c := range []struct {
		on   bool
		name string
	}{{v.beingDeleted, "beingDeleted"}, {v.deletingDependents, "deletingDependents"}, {v.virtual, "virtual"}, {v.missingFromGraph, "missingFromGraph"}} {
		if c.on {
			conds = append(conds, c.name)
		}
	}
	if len(conds) > 0 {
		label += strings.Join(conds, ",") + "\n"
	}
	fmt.Fprintf(w, "  %q [\n", v.uid)
	for _, kv := range [][2]string{
		{"label", label},
		{"group", v.gvk.Group},
		{"version", v.gvk.Version},
		{"kind", v.gvk.Kind},
		{"namespace", v.namespace},
		{"name", v.name},
		{"uid", string(v.uid)},
		{"missing", fmt.Sprint(v.missingFromGraph)},
		{"beingDeleted", fmt.Sprint(v.beingDeleted)},
		{"deletingDependents", fmt.Sprint(v.deletingDependents)},
		{"virtual", fmt.Sprint(v.virtual)},
	} {
		fmt.Fprintf(w, "    %s=%q\n", kv[0], kv[1])
	}
	fmt.Fprintf(w, "  ];\n")
}

type dotEdge struct{ from, to types.UID }

// dotGraph renders nodes that take part in an ownership edge, with an edge
// from each dependent to each of its owners.
func dotGraph(nodes map[types.UID]*node) ([]*dotVertex, []dotEdge) {
	vertices := map[types.UID]*dotVertex{}
	for uid, n := range nodes {
		if n.dependentsLength() == 0 && len(n.getOwners()) == 0 {
			continue
		}
		vertices[uid] = vertexFor(n)
	}
	var edges []dotEdge
	for uid, n := range nodes {
		for _, ref := range n.getOwners() {
			if _, ok := vertices[ref.UID]; !ok {
				vertices[ref.UID] = missingVertex(ref)
			}
			edges = append(edges, dotEdge{uid, ref.UID})
		}
	}
	out := make([]*dotVertex, 0, len(vertices))
	for _, v := range vertices {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].uid < out[j].uid })
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].from != edges[j].from {
			return edges[i].from < edges[j].from
		}
		return edges[i].to < edges[j].to
	})
	return out, edges
}

// connected returns the nodes reachable from uids through owners and
// dependents.
func connected(index *uidToNode, uids []types.UID) map[types.UID]*node {
	out := map[types.UID]*node{}
	todo := append([]types.UID(nil), uids...)
	for len(todo) > 0 {
		uid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if _, seen := out[uid]; seen {
			continue
		}
		n, ok := index.Read(uid)
		if !ok {
			continue
		}
		out[uid] = n
		for _, r := range n.getOwners() {
			todo = append(todo, r.UID)
		}
		for _, d := range n.getDependents() {
			todo = append(todo, d.identity.UID)
		}
	}
	return out
}

// writeDOT writes to a buffer, which cannot fail.
func writeDOT(w *bytes.Buffer, vertices []*dotVertex, edges []dotEdge) {
	w.WriteString("strict digraph full {\n")
	if len(vertices) > 0 {
		w.WriteString("  // Node definitions.\n")
		for _, v := range vertices {
			v.writeDOT(w)
		}
	}
	if len(edges) > 0 {
		w.WriteString("  // Edge definitions.\n")
		for _, e := range edges {
			fmt.Fprintf(w, "  %q -> %q;\n", e.from, e.to)
		}
	}
	w.WriteString("}\n")
}

// DebuggingHandler serves the dependency graph in DOT at /graph (mounted by
// the app under /debug/controllers/garbagecollector); ?uid=X (repeatable)
// limits it to the objects connected to X.
func (gc *GarbageCollector) DebuggingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/graph" {
			http.Error(w, "", http.StatusNotFound)
			return
		}
		index := gc.dependencyGraphBuilder.uidToNode
		var nodes map[types.UID]*node
		if uids := req.URL.Query()["uid"]; len(uids) > 0 {
			var want []types.UID
			for _, u := range uids {
				want = append(want, types.UID(u))
			}
			nodes = connected(index, want)
		} else {
			nodes = map[types.UID]*node{}
			for _, n := range index.snapshot() {
				nodes[n.identity.UID] = n
			}
		}
		var b bytes.Buffer
		vertices, edges := dotGraph(nodes)
		writeDOT(&b, vertices, edges)
		w.Header().Set("Content-Type", "text/vnd.graphviz")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(b.Bytes())
	})
}
