"""Plans and executes trials; studies are campaign templates.  Every study module registers
into :data:`vhpc.campaign.study.STUDIES` when imported, and that registry imports every module
of this package on its first lookup, so a new study is one new module."""
