// Package controller holds the plumbing every controller of the controller
// manager shares: the work loop, its sync outcomes and what it reports to
// /debug/controllers, the tombstone helper, expectations, the
// controller-ref manager (adoption and release), pod creation and deletion
// with events, pod ranking for scale-down, slow-start batching and small
// pod helpers.
//
// Controllers read through listers and write through the client; nothing in
// here keeps global state except the feature-gate lookup cache.
package controller
