"""Names of the manifests a prompt dataset folder and a results folder carry (docs/DESIGN.md section 2).

Kept apart from the item contract (which needs `datasets`) so that a reader that only looks
for a folder's manifest (publish, the runners' out-folder check) imports nothing heavy.
"""

#: the manifest every built prompt dataset folder carries at its root
BUILD_MANIFEST = "build_manifest.json"
#: the manifest every results folder (`probes run`) carries at its root
RESULTS_MANIFEST = "results_manifest.json"
