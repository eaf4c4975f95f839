# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_nodectl_global_optspecs
    string join \n root= state= address= n/namespace= o/output= config= kubelet-root= kubelet-pod-logs= kubelet-cgroup-root= mountinfo= q/quiet timeout= h/help V/version
end

function __fish_nodectl_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_nodectl_global_optspecs) -- $cmd 2>/dev/null
    or return 0
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_nodectl_using_subcommand
    set -l cmd (__fish_nodectl_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c nodectl -n "__fish_nodectl_needs_command" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_needs_command" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_needs_command" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_needs_command" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_needs_command" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_needs_command" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_needs_command" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_needs_command" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_needs_command" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_needs_command" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_needs_command" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_needs_command" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_needs_command" -s V -l version -d 'Print version'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "check" -d 'Every check in one report: the files, the processes and both APIs cross-checked'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "collect" -d 'Write the evidence `check` works from to a file, for `check --from` elsewhere'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "zombies" -d 'Containers CRI shows as RUNNING whose process is dead, and exits CRI recorded late'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "shims" -d 'Every containerd shim process: its pod, age, memory and children'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "leaked-shims" -d 'Shims that no container record owns and that serve no live process; --kill ends them'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "leaked-mounts" -d 'Rootfs and shm mounts, and bundle directories, that nothing owns any more; --unmount and --remove-bundles clean them'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "leaked-snapshots" -d 'Active snapshots that no container, lease or GC root holds; --remove removes them'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "leaked-ips" -d 'Pod addresses host-local holds for sandboxes that no longer exist; --release frees them'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "leaked-sandboxes" -d 'Pod sandboxes left NotReady with no container; --remove stops and removes them through CRI'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "leaked-pod-cgroups" -d 'kubelet pod cgroups whose pod has no sandbox; --remove removes those nothing runs in'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "leaked-netns" -d 'Pod network namespaces CRI made that no sandbox record names and nothing holds (no thread in it, no descriptor on it, no foreign interface); --remove unmounts and removes them'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "serve" -d 'Serve `check`\'s metrics over HTTP (/metrics, /healthz), checking once per --interval and when containerd\'s events call for it; never kills'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "watch" -d 'Tell what `check` finds as it appears and as it clears, looking when containerd\'s events call for it; never kills'
complete -c nodectl -n "__fish_nodectl_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l late-after -d 'An exit recorded this long after it happened is reported as late-exit (at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l since -d 'Only report late exits that happened within this window (at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l settle -d 'Look again this long after the first look before calling a zombie or a blocked shim one (only when the first shows one; 0s looks again at once) [default: 1s, or --timeout if shorter] (at most 1m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l slow -d 'A CRI call slower than this is reported (kubelet\'s PLEG gives up at 3 min; at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l ip-grace -d 'An address host-local holds for a sandbox no API knows counts as leaked once reserved this long (a sandbox being set up has its address before its record; at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l sandbox-grace -d 'A NotReady sandbox with no container counts as leaked this long after its creation (a pod starting or stopping is so for a moment; at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l cri-address -d 'CRI socket [default: the containerd socket]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l from -d 'Check an evidence archive written by `nodectl collect` instead of this node' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l textfile -d 'Also write the metrics of `-o prometheus` to PATH for node_exporter\'s textfile collector, replaced atomically; after a run that fails, the last good series stay, with nodectl_up 0 and the error as a comment' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l cri-address -d 'CRI socket [default: the containerd socket]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l recorder-file -d 'The flight recorder file `watch` writes, archived when there (never through a symlink; at most its stated size)' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l settle -d 'Look again this long after the first look before calling a zombie or a blocked shim one (only when the first shows one; 0s looks again at once) [default: 1s, or --timeout if shorter] (at most 1m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -l force -d 'Replace FILE if it exists (never through a symlink, never one of the files collected)'
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand collect" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l late-after -d 'An exit recorded this long after it happened is reported as late-exit (at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l since -d 'Only report late exits that happened within this window (at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l settle -d 'Look again this long after the first look before calling a zombie or a blocked shim one (only when the first shows one; 0s looks again at once) [default: 1s, or --timeout if shorter] (at most 1m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand zombies" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand shims" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l grace -d 'How long a shim gets to exit after SIGTERM before SIGKILL (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l kill -d 'End the leaked shims (after re-checking each one); without it nothing is touched'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -l yes -d 'Do not ask before killing (required when stdin is not a terminal)'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-shims" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l unmount -d 'Unmount the leaked mounts (each re-checked first); without --yes only says what it would do'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l lazy -d 'Detach lazily (MNT_DETACH) a mount that is busy; without it a busy mount is left and reported'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l remove-bundles -d 'Remove the orphan bundle directories (each re-checked first, only once nothing is mounted below); without --yes only says what it would do'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -l yes -d 'Act: without it, --unmount and --remove-bundles change nothing'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-mounts" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l grace -d 'How long since its last change before an unheld active snapshot is called leaked (an unpack or a container being created holds its snapshot within moments)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l remove -d 'Remove the leaked snapshots (each re-checked first); without --yes only says what it would do'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -l yes -d 'Act: without it, --remove changes nothing'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-snapshots" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l grace -d 'How long ago an address must have been reserved for a sandbox no API knows to count as leaked (a sandbox being set up has its address before its record; at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l release -d 'Release the leaked addresses, as host-local does, under its lock (each re-checked first); without --yes only says what it would do'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -l yes -d 'Act: without it, --release changes nothing'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-ips" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l grace -d 'How long after its creation a NotReady sandbox with no container counts as leaked (a pod starting or stopping is so for a moment; at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l cri-address -d 'CRI socket [default: the containerd socket]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l remove -d 'Stop and remove the leaked sandboxes through CRI, which tears their network down (each re-checked first); without --yes only says what it would do'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -l yes -d 'Act: without it, --remove changes nothing'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-sandboxes" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l grace -d 'How long after its creation a pod cgroup with no sandbox counts as leaked (kubelet makes it before the sandbox; at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l cri-address -d 'CRI socket [default: the containerd socket]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l remove -d 'Remove the leaked pod cgroups nothing runs in, container cgroups first (each re-checked first); without --yes only says what it would do'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -l yes -d 'Act: without it, --remove changes nothing'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-pod-cgroups" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l grace -d 'How long after its creation a namespace no record names counts as leaked (CRI makes it a moment before the record names it; at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l remove -d 'Unmount the leaked namespaces and remove their files, as CRI\'s teardown does (each re-checked first); without --yes only says what it would do'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -l yes -d 'Act: without it, --remove changes nothing'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand leaked-netns" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l listen -d 'Address to serve on: IP:PORT, or :PORT for every address (127.0.0.1:0 picks a free port; the address is printed on stderr)' -r
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l interval -d 'How often the checks run, whatever the scrape rate; scrapes get the last result (1s to 1h)' -r
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l late-after -d 'An exit recorded this long after it happened is reported as late-exit (at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l since -d 'Only report late exits that happened within this window (at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l settle -d 'Look again this long after the first look before calling a zombie or a blocked shim one (only when the first shows one; 0s looks again at once) [default: 1s, or --timeout if shorter] (at most 1m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l slow -d 'A CRI call slower than this is reported (kubelet\'s PLEG gives up at 3 min; at most 10m)' -r
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l ip-grace -d 'An address host-local holds for a sandbox no API knows counts as leaked once reserved this long (a sandbox being set up has its address before its record; at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l sandbox-grace -d 'A NotReady sandbox with no container counts as leaked this long after its creation (a pod starting or stopping is so for a moment; at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l cri-address -d 'CRI socket [default: the containerd socket]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l interval -d 'The periodic full look, beside the ones containerd\'s events call for (1s to 1h)' -r
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l recorder-file -d 'Where the flight recorder\'s ring is written after each change, for `collect` (in a directory only root can write to, made 0700 if missing; never through a symlink)' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l late-after -d 'An exit recorded this long after it happened is reported as late-exit (at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l since -d 'Only report late exits that happened within this window (at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l settle -d 'Look again this long after the first look before calling a zombie or a blocked shim one (only when the first shows one; 0s looks again at once) [default: 1s, or --timeout if shorter] (at most 1m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l slow -d 'A CRI call slower than this is reported (kubelet\'s PLEG gives up at 3 min; at most 10m)' -r
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l ip-grace -d 'An address host-local holds for a sandbox no API knows counts as leaked once reserved this long (a sandbox being set up has its address before its record; at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l sandbox-grace -d 'A NotReady sandbox with no container counts as leaked this long after its creation (a pod starting or stopping is so for a moment; at most 10 years)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l cri-address -d 'CRI socket [default: the containerd socket]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l root -d 'containerd root directory [default: the running containerd\'s, else from its config, else /var/lib/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l state -d 'containerd state directory [default: the running containerd\'s, else from its config, else /run/containerd]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l address -d 'containerd socket [default: the running containerd\'s, else from its config, else /run/containerd/containerd.sock]; with several containerds running, chooses one' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -s n -l namespace -d 'containerd namespace of the Kubernetes containers' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -s o -l output -d 'Output format' -r -f -a "table\t'For people: a list that fits the terminal (80 columns into a pipe)'
wide\t'For people: the list, then each finding\'s evidence, cause and remedy'
json\t'One JSON document (schema/report-v1.schema.json)'
prometheus\t'node_exporter textfile-collector metrics'
npd\t'node-problem-detector custom plugin, permanent rule (the condition): one line, exit 1 only for a critical finding, 2 could not check'
npd-event\t'node-problem-detector custom plugin, temporary rule (events): one line, exit 1 only for warnings'"
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l config -d 'containerd config file to read root, state and socket from [default: the one the running containerd was started with, else /etc/containerd/config.toml]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l kubelet-root -d 'kubelet\'s root directory (its --root-dir) [default: the running kubelet\'s, else /var/lib/kubelet]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l kubelet-pod-logs -d 'kubelet\'s pod log directory, where each pod\'s <namespace>_<name>_<uid> ties it to kubelet [default: the running kubelet\'s podLogsDir, else /var/log/pods]' -r -f -a "(__fish_complete_directories)"
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l kubelet-cgroup-root -d 'kubelet\'s cgroup root (its --cgroup-root, where kubepods is made) [default: the running kubelet\'s, else /]' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l mountinfo -d 'Mount table to read [default: the running containerd\'s, /proc/<its pid>/mountinfo; /proc/self/mountinfo when none is identified]' -r -F
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -l timeout -d 'Deadline for each containerd API call (at most 10m)' -r -f
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -s q -l quiet -d 'Print nothing; only the exit status tells (0 nothing found, 1 findings, 2 could not check)'
complete -c nodectl -n "__fish_nodectl_using_subcommand watch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "check" -d 'Every check in one report: the files, the processes and both APIs cross-checked'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "collect" -d 'Write the evidence `check` works from to a file, for `check --from` elsewhere'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "zombies" -d 'Containers CRI shows as RUNNING whose process is dead, and exits CRI recorded late'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "shims" -d 'Every containerd shim process: its pod, age, memory and children'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "leaked-shims" -d 'Shims that no container record owns and that serve no live process; --kill ends them'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "leaked-mounts" -d 'Rootfs and shm mounts, and bundle directories, that nothing owns any more; --unmount and --remove-bundles clean them'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "leaked-snapshots" -d 'Active snapshots that no container, lease or GC root holds; --remove removes them'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "leaked-ips" -d 'Pod addresses host-local holds for sandboxes that no longer exist; --release frees them'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "leaked-sandboxes" -d 'Pod sandboxes left NotReady with no container; --remove stops and removes them through CRI'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "leaked-pod-cgroups" -d 'kubelet pod cgroups whose pod has no sandbox; --remove removes those nothing runs in'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "leaked-netns" -d 'Pod network namespaces CRI made that no sandbox record names and nothing holds (no thread in it, no descriptor on it, no foreign interface); --remove unmounts and removes them'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "serve" -d 'Serve `check`\'s metrics over HTTP (/metrics, /healthz), checking once per --interval and when containerd\'s events call for it; never kills'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "watch" -d 'Tell what `check` finds as it appears and as it clears, looking when containerd\'s events call for it; never kills'
complete -c nodectl -n "__fish_nodectl_using_subcommand help; and not __fish_seen_subcommand_from check collect zombies shims leaked-shims leaked-mounts leaked-snapshots leaked-ips leaked-sandboxes leaked-pod-cgroups leaked-netns serve watch help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
