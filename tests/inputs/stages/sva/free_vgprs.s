; Few VGPRs used of the 64 allocated: the SVA gets a free one for the
; whole kernel.
	v_mov_b32_e32 v1, v0
	v_add_u32_e32 v2, v1, v0
	s_endpgm
