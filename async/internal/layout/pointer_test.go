package layout

import (
	"strconv"
	"testing"

	"github.com/flashsale/flashsale/internal/hashslot"
)

// TestPointerKey checks where an order's pointer goes: in the slot a
// slotted id carries, a bucket per 16 seconds; a plain id has none
// (issue 34: gate.lua writes pointers with the shard's keys).
func TestPointerKey(t *testing.T) {
	k := New("fs:")
	for _, tc := range []struct {
		name string
		id   int64
		key  string
		slot int
	}{
		{"plain: none", 28552331<<32 | 17, "", -1},
		{"slotted, slot 0", 1<<62 | 28552331<<31 | 5<<14, "fs:{" + hashslot.Tag(0) + "}:p" + strconv.Itoa(28552331>>4), 0},
		{"slotted, slot 16383", 1<<62 | 28552331<<31 | 5<<14 | 16383, "fs:{" + hashslot.Tag(16383) + "}:p" + strconv.Itoa(28552331>>4), 16383},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, field := k.Pointer(tc.id)
			if key != tc.key || field != strconv.FormatInt(tc.id, 10) {
				t.Errorf("Pointer(%d) = %q, %q; want %q, the id", tc.id, key, field, tc.key)
			}
			if tc.slot >= 0 && hashslot.Of(key) != tc.slot {
				t.Errorf("Pointer(%d) = %q, in slot %d, not the id's %d", tc.id, key, hashslot.Of(key), tc.slot)
			}
		})
	}
}
