# XS_CONTROL (0): "<command>\0<args>..." from a privileged connection.
case check
  a: CONTROL "check\0"
    = CONTROL req=1 tx=0 "OK\0"

case print
  a: CONTROL "print\0hello from the tests\0"
    = CONTROL req=1 tx=0 "OK\0"

case print-no-arg
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "print\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case unknown-command
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "no-such-command\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case empty-payload
  oxenstored: never answers a message with an empty payload (waits for more bytes)
  a: CONTROL ""
    = ERROR req=1 tx=0 "EINVAL\0"

case empty-command
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case no-nul
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "check"
    = ERROR req=1 tx=0 "EINVAL\0"

case debug-alias-type
  # The old XS_DEBUG name for the same number.
  a: 0 "check\0"
    = CONTROL req=1 tx=0 "OK\0"

case check-then-read
  a: WRITE "/c\0v"
    = WRITE req=1 tx=0 "OK\0"
  a: CONTROL "check\0"
    = CONTROL req=2 tx=0 "OK\0"
  a: READ "/c\0"
    = READ req=3 tx=0 "v"

case in-transaction
  a: TRANSACTION_START "\0" -> $t
    = TRANSACTION_START req=1 tx=0 "$t\0"
  a: CONTROL tx=$t "check\0"
    = CONTROL req=2 tx=$t "OK\0"

case help
  oxenstored: answers CONTROL with OK whatever the command
  xen-4.20: its own CONTROL output: help text, quota names and order, "(max N)" in reports, log without arguments lists the switches
  a: CONTROL "help\0"
    = CONTROL req=1 tx=0 "check\t\nlog\ton|off\nlive-update\t[-c <cmdline>] [-F] [-t <timeout>] <file>\n    Default timeout is 60 seconds.\nlogfile\t<file>\nmemreport\t[<file>]\nprint\t<string>\nquota\t[set <name> <val>|<domid>]\nquota-soft\t[set <name> <val>]\nhelp\t\n\0"
    4.20 = CONTROL req=1 tx=0 "check           \nlog             [on|off|+<switch>|-<switch>]\nlive-update     [-c <cmdline>] [-F] [-t <timeout>] <file>\n    Default timeout is 60 seconds.\nlogfile         <file>\nmemreport       [<file>]\nprint           <string>\nquota           [set <name> <val>|<domid>|max [-r]]\nquota-soft      [set <name> <val>]\nhelp            \n\0"

case quota
  oxenstored: answers CONTROL with OK whatever the command
  xen-4.20: its own CONTROL output: help text, quota names and order, "(max N)" in reports, log without arguments lists the switches
  a: CONTROL "quota\0"
    = CONTROL req=1 tx=0 "Quota settings:\nnodes            :     1000 Nodes per domain\nwatches          :      128 Watches per domain\ntransactions     :       10 Transactions per domain\noutstanding      :       20 Outstanding requests per domain\ntransaction-nodes:     1024 Max. number of accessed nodes per transaction\nmemory           :  2621440 Total Xenstore memory per domain (error level)\nnode-size        :     2048 Max. size of a node\npath-max         :     2048 Max. length of a node path\npermissions      :        5 Max. number of permissions per node\n\0"
    4.20 = CONTROL req=1 tx=0 "Quota settings:\nnodes            :     1000 Nodes per domain\nwatches          :      128 Watches per domain\noutstanding      :       20 Outstanding requests per domain\nmemory           :  2621440 Total Xenstore memory per domain (error level)\ntransactions     :       10 Active transactions per domain\ntransaction-nodes:     1024 Max. number of accessed nodes per transaction\nnode-permissions :        5 Max. number of permissions per node\npath-max         :     2048 Max. length of a node path\nnode-size        :     2048 Max. size of a node\n\0"

case quota-soft
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "quota-soft\0"
    = CONTROL req=1 tx=0 "Quota settings:\nmemory           :  2097152 Total Xenstore memory per domain (warning level)\n\0"

case memreport
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "memreport\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case log-no-arg
  oxenstored: answers CONTROL with OK whatever the command
  xen-4.20: its own CONTROL output: help text, quota names and order, "(max N)" in reports, log without arguments lists the switches
  a: CONTROL "log\0"
    = ERROR req=1 tx=0 "EINVAL\0"
    4.20 = CONTROL req=1 tx=0 "Log switch settings:\nobj     : on\nio      : on\nwrl     : off\nacc     : off\ntdb     : off\n\0"

case check-extra-arg
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "check\0extra\0"
    = ERROR req=1 tx=0 "EINVAL\0"

case live-update-no-arg
  oxenstored: answers CONTROL with OK whatever the command
  a: CONTROL "live-update\0"
    = ERROR req=1 tx=0 "EINVAL\0"
