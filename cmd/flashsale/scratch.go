package main

import (
	"os"
	"sync"
)

// scratch holds the directories this process made for embedded SQLite
// files. backends.Close removes its own; when a second signal ends the
// process at once, before any Close runs, removeScratch removes them all.
var scratch struct {
	sync.Mutex
	dirs map[string]bool
}

// makeScratch makes a directory for an embedded backend's files and returns
// it with the function that removes it.
func makeScratch() (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp("", "flashsale-")
	if err != nil {
		return "", nil, err
	}
	scratch.Lock()
	defer scratch.Unlock()
	if scratch.dirs == nil {
		scratch.dirs = map[string]bool{}
	}
	scratch.dirs[dir] = true
	return dir, func() {
		scratch.Lock()
		defer scratch.Unlock()
		delete(scratch.dirs, dir)
		os.RemoveAll(dir)
	}, nil
}

// removeScratch removes every scratch directory still there.
func removeScratch() {
	scratch.Lock()
	defer scratch.Unlock()
	for dir := range scratch.dirs {
		os.RemoveAll(dir)
		delete(scratch.dirs, dir)
	}
}
