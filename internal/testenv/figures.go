package testenv

import (
	"flag"
	"os"
	"testing"
)

// partitionFigures is go test's -partition-figures, for a package whose
// tests import testenv (go test ./cmd/flashsale/ -partition-figures).
var partitionFigures = flag.Bool("partition-figures", false,
	"also run the partition tests that only gather docs/partitions.md's figures (or FLASHSALE_PARTITION_FIGURES=1)")

// PartitionFigures reports whether the runs that only gather the figures
// of docs/partitions.md run: with -partition-figures, or with
// FLASHSALE_PARTITION_FIGURES=1 (which works for several packages at
// once). CI leaves them out; what they assert runs in CI by other runs.
func PartitionFigures() bool {
	return *partitionFigures || os.Getenv("FLASHSALE_PARTITION_FIGURES") == "1"
}

// SkipUnlessPartitionFigures skips a run that only gathers figures unless
// PartitionFigures, saying how to ask for it.
func SkipUnlessPartitionFigures(t testing.TB) {
	t.Helper()
	if !PartitionFigures() {
		t.Skip("gathers docs/partitions.md's figures only: run with -partition-figures or FLASHSALE_PARTITION_FIGURES=1")
	}
}
