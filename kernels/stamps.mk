# Stamp files in $(BUILD) that every kernel depends on, shared by kernels/Makefile and
# kernels/npb/Makefile (included after their first rule, so `all` stays the default goal):
#   build-flags     the compiler flags, rewritten only when they change (a new MARCH= or
#                   CFLAGS= rebuilds every kernel; vhpc records them in the fingerprint);
#   build-key.want  the build key vhpc passes (VHPC_BUILD_KEY: a hash of the sources, the
#                   compiler and MPI versions and the flags), rewritten only when it changes,
#                   so a new compiler or MPI rebuilds every kernel in that BUILD folder, the
#                   NPB binaries included.  vhpc records the key it built in $(BUILD)/build-key
#                   once make succeeded.
FLAGS_FILE := $(BUILD)/build-flags
KEY_FILE   := $(BUILD)/build-key.want

$(FLAGS_FILE): FORCE | $(BUILD)
	@echo 'CFLAGS=$(CFLAGS)' | cmp -s - $@ || echo 'CFLAGS=$(CFLAGS)' > $@

ifneq ($(VHPC_BUILD_KEY),)
$(KEY_FILE): FORCE | $(BUILD)
	@echo '$(VHPC_BUILD_KEY)' | cmp -s - $@ || echo '$(VHPC_BUILD_KEY)' > $@
else
$(KEY_FILE): | $(BUILD)
	@touch $@
endif
