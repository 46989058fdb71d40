package selinuxwarning

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// labelParts is an SELinux label split into user, role, type and level.
type labelParts [4]string

// parseLabel splits "user:role:type:level"; the level keeps its own colons
// ("s0:c1,c2"). Missing trailing parts stay empty.
func parseLabel(label string) labelParts {
	var p labelParts
	if label != "" {
		copy(p[:], strings.SplitN(label, ":", 4))
	}
	return p
}

// optionsToLabel joins SELinuxOptions into a file label. Without a real
// SELinux policy the controller cannot fill in defaults, so unset parts
// stay empty; options with nothing set give "".
func optionsToLabel(opts *v1.SELinuxOptions) string {
	if opts == nil {
		return ""
	}
	label := strings.Join([]string{opts.User, opts.Role, opts.Type, opts.Level}, ":")
	if label == ":::" {
		return ""
	}
	return label
}

// labelsConflict: user, role and type conflict only when both are set and
// differ, since an unset part is filled in by the node's defaults, which the
// controller cannot know. The level must always match, as it is what tells
// pods apart (and the node's default level differs per container).
func labelsConflict(a, b labelParts) bool {
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		if i == len(a)-1 {
			return true
		}
		if a[i] != "" && b[i] != "" {
			return true
		}
	}
	return false
}
