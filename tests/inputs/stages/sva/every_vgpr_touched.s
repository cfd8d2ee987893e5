; Every VGPR below the AGPRs (accum_offset 32) written once, none live for
; long: the SVA still finds a VGPR free wherever it is needed.
	v_mov_b32_e32 v1, 1
	v_mov_b32_e32 v2, 2
	v_mov_b32_e32 v3, 3
	v_mov_b32_e32 v4, 4
	v_mov_b32_e32 v5, 5
	v_mov_b32_e32 v6, 6
	v_mov_b32_e32 v7, 7
	v_mov_b32_e32 v8, 8
	v_mov_b32_e32 v9, 9
	v_mov_b32_e32 v10, 10
	v_mov_b32_e32 v11, 11
	v_mov_b32_e32 v12, 12
	v_mov_b32_e32 v13, 13
	v_mov_b32_e32 v14, 14
	v_mov_b32_e32 v15, 15
	v_mov_b32_e32 v16, 16
	v_mov_b32_e32 v17, 17
	v_mov_b32_e32 v18, 18
	v_mov_b32_e32 v19, 19
	v_mov_b32_e32 v20, 20
	v_mov_b32_e32 v21, 21
	v_mov_b32_e32 v22, 22
	v_mov_b32_e32 v23, 23
	v_mov_b32_e32 v24, 24
	v_mov_b32_e32 v25, 25
	v_mov_b32_e32 v26, 26
	v_mov_b32_e32 v27, 27
	v_mov_b32_e32 v28, 28
	v_mov_b32_e32 v29, 29
	v_mov_b32_e32 v30, 30
	v_mov_b32_e32 v31, 31
	s_endpgm
