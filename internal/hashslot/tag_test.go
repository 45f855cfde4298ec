package hashslot

import "testing"

// TestTagCoversEverySlot checks that every slot has a tag and that the
// tag's slot is that slot.
func TestTagCoversEverySlot(t *testing.T) {
	for s := range Slots {
		tag := Tag(s)
		if tag == "" {
			t.Fatalf("slot %d has no tag", s)
		}
		if got := Of("x{" + tag + "}y"); got != s {
			t.Fatalf("Tag(%d) = %q, whose slot is %d", s, tag, got)
		}
	}
}
