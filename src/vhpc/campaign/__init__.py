"""Plans and executes trials; studies are campaign templates.  Every study module registers
into :data:`vhpc.campaign.study.STUDIES` when imported; importing them here makes the registry
complete whichever campaign module is imported first (no study module imports another)."""

from vhpc.campaign import studies, appstudy  # noqa: F401  in this order: the studies' order
