; processor: gfx908
; Every VGPR of the allocation (64) live across one instruction: no VGPR is
; free there, and growing the allocation would cost a wave per SIMD.
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
	v_mov_b32_e32 v32, 32
	v_mov_b32_e32 v33, 33
	v_mov_b32_e32 v34, 34
	v_mov_b32_e32 v35, 35
	v_mov_b32_e32 v36, 36
	v_mov_b32_e32 v37, 37
	v_mov_b32_e32 v38, 38
	v_mov_b32_e32 v39, 39
	v_mov_b32_e32 v40, 40
	v_mov_b32_e32 v41, 41
	v_mov_b32_e32 v42, 42
	v_mov_b32_e32 v43, 43
	v_mov_b32_e32 v44, 44
	v_mov_b32_e32 v45, 45
	v_mov_b32_e32 v46, 46
	v_mov_b32_e32 v47, 47
	v_mov_b32_e32 v48, 48
	v_mov_b32_e32 v49, 49
	v_mov_b32_e32 v50, 50
	v_mov_b32_e32 v51, 51
	v_mov_b32_e32 v52, 52
	v_mov_b32_e32 v53, 53
	v_mov_b32_e32 v54, 54
	v_mov_b32_e32 v55, 55
	v_mov_b32_e32 v56, 56
	v_mov_b32_e32 v57, 57
	v_mov_b32_e32 v58, 58
	v_mov_b32_e32 v59, 59
	v_mov_b32_e32 v60, 60
	v_mov_b32_e32 v61, 61
	v_mov_b32_e32 v62, 62
	v_mov_b32_e32 v63, 63
	s_nop 0
	v_add_u32_e32 v0, v0, v1
	v_add_u32_e32 v0, v0, v2
	v_add_u32_e32 v0, v0, v3
	v_add_u32_e32 v0, v0, v4
	v_add_u32_e32 v0, v0, v5
	v_add_u32_e32 v0, v0, v6
	v_add_u32_e32 v0, v0, v7
	v_add_u32_e32 v0, v0, v8
	v_add_u32_e32 v0, v0, v9
	v_add_u32_e32 v0, v0, v10
	v_add_u32_e32 v0, v0, v11
	v_add_u32_e32 v0, v0, v12
	v_add_u32_e32 v0, v0, v13
	v_add_u32_e32 v0, v0, v14
	v_add_u32_e32 v0, v0, v15
	v_add_u32_e32 v0, v0, v16
	v_add_u32_e32 v0, v0, v17
	v_add_u32_e32 v0, v0, v18
	v_add_u32_e32 v0, v0, v19
	v_add_u32_e32 v0, v0, v20
	v_add_u32_e32 v0, v0, v21
	v_add_u32_e32 v0, v0, v22
	v_add_u32_e32 v0, v0, v23
	v_add_u32_e32 v0, v0, v24
	v_add_u32_e32 v0, v0, v25
	v_add_u32_e32 v0, v0, v26
	v_add_u32_e32 v0, v0, v27
	v_add_u32_e32 v0, v0, v28
	v_add_u32_e32 v0, v0, v29
	v_add_u32_e32 v0, v0, v30
	v_add_u32_e32 v0, v0, v31
	v_add_u32_e32 v0, v0, v32
	v_add_u32_e32 v0, v0, v33
	v_add_u32_e32 v0, v0, v34
	v_add_u32_e32 v0, v0, v35
	v_add_u32_e32 v0, v0, v36
	v_add_u32_e32 v0, v0, v37
	v_add_u32_e32 v0, v0, v38
	v_add_u32_e32 v0, v0, v39
	v_add_u32_e32 v0, v0, v40
	v_add_u32_e32 v0, v0, v41
	v_add_u32_e32 v0, v0, v42
	v_add_u32_e32 v0, v0, v43
	v_add_u32_e32 v0, v0, v44
	v_add_u32_e32 v0, v0, v45
	v_add_u32_e32 v0, v0, v46
	v_add_u32_e32 v0, v0, v47
	v_add_u32_e32 v0, v0, v48
	v_add_u32_e32 v0, v0, v49
	v_add_u32_e32 v0, v0, v50
	v_add_u32_e32 v0, v0, v51
	v_add_u32_e32 v0, v0, v52
	v_add_u32_e32 v0, v0, v53
	v_add_u32_e32 v0, v0, v54
	v_add_u32_e32 v0, v0, v55
	v_add_u32_e32 v0, v0, v56
	v_add_u32_e32 v0, v0, v57
	v_add_u32_e32 v0, v0, v58
	v_add_u32_e32 v0, v0, v59
	v_add_u32_e32 v0, v0, v60
	v_add_u32_e32 v0, v0, v61
	v_add_u32_e32 v0, v0, v62
	v_add_u32_e32 v0, v0, v63
	s_endpgm
