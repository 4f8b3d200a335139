package kubeconv

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
)

// podUTF8 and jobUTF8 see a string that is not UTF-8 wherever the
// contract's Pod and Job have one (a Struct aside): each string field, list
// element, map key and map value, set alone; validUTF8 mends each.
func TestTheChecksOfUTF8SeeEveryString(t *testing.T) {
	t.Run("Pod", func(t *testing.T) {
		seesEveryString(t, func() proto.Message { return &jobplanev1.Pod{} },
			func(m proto.Message) bool { return podUTF8(m.(*jobplanev1.Pod)) })
	})
	t.Run("Job", func(t *testing.T) {
		seesEveryString(t, func() proto.Message { return &jobplanev1.Job{} },
			func(m proto.Message) bool { return jobUTF8(m.(*jobplanev1.Job)) })
	})
}

func seesEveryString(t *testing.T, empty func() proto.Message, valid func(proto.Message) bool) {
	paths := stringPaths(empty().ProtoReflect().Descriptor(), nil, map[protoreflect.FullName]bool{})
	if len(paths) < 30 {
		t.Fatalf("found %d strings: the walk is broken", len(paths))
	}
	for _, path := range paths {
		m := empty()
		setInvalid(m.ProtoReflect(), path)
		if valid(m) {
			t.Errorf("the check misses %v", path)
		}
		validUTF8(m.ProtoReflect())
		if !valid(m) {
			t.Errorf("validUTF8 left %v invalid", path)
		}
	}
}

// step is one step of a path to a string: a field, and for a map whether
// the string is its key.
type step struct {
	field protoreflect.FieldDescriptor
	key   bool
}

func (s step) String() string {
	if s.key {
		return string(s.field.Name()) + "(key)"
	}
	return string(s.field.Name())
}

// stringPaths are the paths to every string under md.
func stringPaths(md protoreflect.MessageDescriptor, prefix []step, seen map[protoreflect.FullName]bool) [][]step {
	if seen[md.FullName()] {
		return nil
	}
	seen[md.FullName()] = true
	defer delete(seen, md.FullName())
	var out [][]step
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		at := append(append([]step(nil), prefix...), step{field: fd})
		switch {
		case fd.IsMap():
			out = append(out, append(append([]step(nil), prefix...), step{field: fd, key: true}), at)
		case fd.Kind() == protoreflect.StringKind:
			out = append(out, at)
		case fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() != structName:
			out = append(out, stringPaths(fd.Message(), at, seen)...)
		}
	}
	return out
}

// setInvalid sets the string at path to one that is not UTF-8, making the
// messages and lists on the way.
func setInvalid(m protoreflect.Message, path []step) {
	const bad = "\xff"
	s := path[0]
	fd := s.field
	switch {
	case fd.IsMap():
		key, value := "k", protoreflect.ValueOfString("v")
		if s.key {
			key = bad
		} else {
			value = protoreflect.ValueOfString(bad)
		}
		m.Mutable(fd).Map().Set(protoreflect.ValueOfString(key).MapKey(), value)
	case fd.IsList() && fd.Kind() == protoreflect.StringKind:
		m.Mutable(fd).List().Append(protoreflect.ValueOfString(bad))
	case fd.IsList():
		list := m.Mutable(fd).List()
		elem := list.NewElement()
		setInvalid(elem.Message(), path[1:])
		list.Append(elem)
	case fd.Kind() == protoreflect.StringKind:
		m.Set(fd, protoreflect.ValueOfString(bad))
	default:
		setInvalid(m.Mutable(fd).Message(), path[1:])
	}
}
