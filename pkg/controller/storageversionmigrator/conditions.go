package storageversionmigrator

import (
	"fmt"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons and messages, as upstream writes them.
const (
	migrationSucceededReason  = "StorageVersionMigrationSucceeded"
	migrationFailedReason     = "StorageVersionMigrationFailed"
	migrationRunningReason    = "MigrationRunning"
	migrationCompletedReason  = "MigrationCompleted"
	migrationCompletedMessage = "Migration completed"
)

// addConditionOnce appends a True condition of type t unless the migration
// already has one of that type with a definite status (True or False): a
// condition set this way is never overwritten.
func addConditionOnce(svm *svmv1.StorageVersionMigration, t svmv1.MigrationConditionType, reason, message string) *svmv1.StorageVersionMigration {
	if c := meta.FindStatusCondition(svm.Status.Conditions, string(t)); c != nil &&
		(c.Status == metav1.ConditionTrue || c.Status == metav1.ConditionFalse) {
		return svm
	}
	svm.Status.Conditions = append(svm.Status.Conditions, metav1.Condition{
		Type:               string(t),
		Status:             metav1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		Reason:             reason,
		Message:            message,
	})
	return svm
}

// progress is how far a migration pass got: remaining of total objects are
// not yet written.
type progress struct {
	remaining, total int
}

// runningMessage is the Running condition's message; p may be nil before
// any object was looked at, and transient is a retryable error that
// interrupted the pass.
func runningMessage(p *progress, transient error) string {
	msg := "The migration is running"
	if p != nil && p.total > 0 {
		if p.remaining > 0 {
			msg += fmt.Sprintf(", %d/%d objects not yet migrated", p.remaining, p.total)
		} else {
			msg += fmt.Sprintf(", %d objects verified migrated", p.total)
		}
	}
	if transient != nil {
		msg += "; transient error: " + transient.Error()
	}
	return msg
}

// runningCondition is the Running=True condition with its message.
func runningCondition(p *progress, transient error) metav1.Condition {
	return metav1.Condition{
		Type:               string(svmv1.MigrationRunning),
		Status:             metav1.ConditionTrue,
		LastTransitionTime: metav1.Now(),
		Reason:             migrationRunningReason,
		Message:            runningMessage(p, transient),
	}
}

func isTerminal(svm *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationSucceeded)) ||
		meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationFailed))
}

func isRunning(svm *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1.MigrationRunning))
}
